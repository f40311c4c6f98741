module svc/sdk/go

go 1.26.8

require golang.org/x/text v0.42.0

require golang.org/x/mod v0.42.0
