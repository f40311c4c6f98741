// Command svc is the authorization gateway for AI agents.
//
// # Usage
//
//	svc [serve]               run the gateway (the default)
//	svc migrate               apply database migrations and exit
//	svc tenants create NAME   create a tenant, print its id and admin token once
//	svc verify-receipts [-public-key BASE64] FILE  verify an exported receipt chain offline
//	svc verify-pack [-public-key BASE64] FILE      verify an evidence pack offline
//	svc version               print the build version
//
// Configuration comes from the environment (docs/configuration.md lists every
// variable); an invalid value stops the process with a message naming it.
package main

import (
	"os"

	"svc/cmd/svc/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(cli.Run(version, os.Args[1:], os.Stdout, os.Stderr))
}
