// Command etcd is etcd's own server main, built from the pinned
// go.etcd.io/etcd/server/v3 module (go install refuses that module because of
// its replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
