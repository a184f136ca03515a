package benchenv

import (
	"context"
	"fmt"
)

// openSQL opens a SQL backend. The SQL adapter (adapters/sql) is not merged
// into this branch yet.
func openSQL(_ context.Context, name string, _ Options) (*Store, error) {
	return nil, fmt.Errorf("backend %q needs the SQL adapter (adapters/sql), not merged yet", name)
}
