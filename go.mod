module github.com/courier-gw/courier

go 1.26
