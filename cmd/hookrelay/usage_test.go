package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The usage text is the CLI's reference: every flag a command takes is
// shown on that command's line (or, for the filters, as [FILTERS]).
func TestUsageShowsEveryFlagACommandTakes(t *testing.T) {
	flagRE := regexp.MustCompile(`--([a-z][a-z-]*)`)
	candidates := map[string]bool{}
	for _, m := range flagRE.FindAllStringSubmatch(usage, -1) {
		candidates[m[1]] = true
	}
	filters := map[string]bool{"tenant": true, "destination": true, "event-type": true, "failure": true, "since": true, "before": true}
	global := map[string]bool{"dsn": true, "table-prefix": true, "json": true}

	body, _, _ := strings.Cut(usage, "\nfilters")
	_, body, _ = strings.Cut(body, "commands:\n")
	checked := 0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue // a description's continuation
		}
		synopsis, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		var words []string
		for _, w := range strings.Fields(synopsis) {
			if w != strings.ToLower(w) || strings.HasPrefix(w, "[") || strings.HasPrefix(w, "-") {
				break
			}
			words = append(words, w)
		}
		for name := range candidates {
			if global[name] {
				continue
			}
			var stdout, stderr bytes.Buffer
			args := append(append([]string{}, words...), "--"+name+"=x")
			run(context.Background(), args, &stdout, &stderr, func(string) string { return "" })
			if strings.Contains(stderr.String(), "flag provided but not defined") {
				continue
			}
			checked++
			shown := strings.Contains(synopsis, "--"+name) || (filters[name] && strings.Contains(synopsis, "[FILTERS]"))
			assert.True(t, shown, "%q takes --%s, but its usage line %q does not show it", strings.Join(words, " "), name, synopsis)
		}
	}
	assert.Greater(t, checked, 10, "the probe found the commands' flags")
}
