package main_test

import (
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// The command line of webhook-gateway: testenv.CheckServiceCommandLine has the cases.
func TestCommandLine(t *testing.T) { testenv.CheckServiceCommandLine(t, "webhook-gateway") }
