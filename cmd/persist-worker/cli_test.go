package main

import (
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// The command line of persist-worker: testenv.CheckServiceCommandLine has the cases.
func TestCommandLine(t *testing.T) { testenv.CheckServiceCommandLine(t, "persist-worker") }
