// Package goclient holds the tests that drive a Settee server with Kivik
// (github.com/go-kivik/kivik/v4 and its CouchDB driver), used as Kivik's documentation shows.
//
// Run them with the server's URL (no credentials in it) and its admin's credentials:
//
//	SETTEE_URL=http://127.0.0.1:5984 SETTEE_USER=admin SETTEE_PASSWORD=secret go test ./...
//
// Without SETTEE_URL every test is skipped. KIVIK_NO_GZIP=1 turns off Kivik's default gzip
// compression of request bodies, only to look past a server that cannot read them.
package goclient
