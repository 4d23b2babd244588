module pier.bench/collapseclient

go 1.22
