//go:build tools

// Package tools pins helm-unittest as a module dependency so `go build` can build its command.
package tools

import _ "github.com/helm-unittest/helm-unittest/cmd/helm-unittest"
