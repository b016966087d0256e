module settee.test/clients/go

go 1.22

require github.com/go-kivik/kivik/v4 v4.5.2

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/net v0.35.0 // indirect
	golang.org/x/sync v0.11.0 // indirect
)
