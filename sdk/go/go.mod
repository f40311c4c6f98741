module svc/sdk/go

go 1.26.8

require golang.org/x/text v0.42.0
