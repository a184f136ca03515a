// Package filterlist reads the comma-separated lists that the CLI's
// selection flags and the console's filter fields take, as one CSV record
// (encoding/csv): a value holding a comma is written in double quotes,
// "acct,eu", with a double quote inside it doubled. A value with no comma
// is written as it is, a double quote inside it included (say "hi").
package filterlist

import (
	"encoding/csv"
	"errors"
	"io"
	"strings"
)

// Split returns the values of s, each trimmed of white space; blank
// values are dropped. It refuses a quoted value left open (or followed
// by more than a comma) and a line break outside quotes, which would
// otherwise select values the operator did not write.
func Split(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	fields, err := record(s, false)
	if errors.Is(err, csv.ErrBareQuote) {
		// A double quote inside a value written without quotes is part
		// of it.
		fields, err = record(s, true)
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out, nil
}

func record(s string, lazy bool) ([]string, error) {
	r := csv.NewReader(strings.NewReader(s))
	r.LazyQuotes = lazy
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	switch {
	case errors.Is(err, io.EOF):
		return nil, nil
	case errors.Is(err, csv.ErrBareQuote):
		return nil, err
	case err != nil:
		return nil, errors.New(`has a quoted value left open or followed by more than a comma: write a value holding a comma in double quotes, "like,this"`)
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		return nil, errors.New(`holds a line break outside double quotes: write such a value in double quotes`)
	}
	return fields, nil
}

// Join writes values as Split reads them back: a value holding a comma,
// a line break or a double quote, in double quotes.
func Join(values []string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		if strings.ContainsAny(v, ",\"\r\n") {
			v = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
		}
		parts[i] = v
	}
	return strings.Join(parts, ",")
}
