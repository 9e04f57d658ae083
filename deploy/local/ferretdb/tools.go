//go:build tools

// Package tools pins FerretDB as a module dependency so `go build` can build its command.
package tools

import _ "github.com/FerretDB/FerretDB/cmd/ferretdb"
