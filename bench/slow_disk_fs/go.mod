module pier.bench/slowdiskfs

go 1.22

require github.com/hanwen/go-fuse/v2 v2.12.1

require golang.org/x/sys v0.28.0 // indirect
