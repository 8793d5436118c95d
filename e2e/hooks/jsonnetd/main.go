// Command jsonnetd serves Jsonnet hooks as Metacontroller's jsonnetd image
// does for its examples (service-per-pod): a POST to /NAME evaluates
// NAME.jsonnet in the working directory, a function of one argument,
// request, given the request's JSON body, and answers what it evaluates
// to. It listens on a free loopback port (or -listen) and prints
// "listening on PORT", so the end-to-end tests run those hooks unchanged
// as local processes.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-jsonnet"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "address to listen on")
	dir := flag.String("dir", ".", "directory of the hooks' .jsonnet files")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %d\n", l.Addr().(*net.TCPAddr).Port)
	log.Fatal(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(*dir, w, r)
	})))
}

// serve evaluates the hook the request's path names with its body.
func serve(dir string, w http.ResponseWriter, r *http.Request) {
	name := strings.Trim(r.URL.Path, "/")
	file := filepath.Join(dir, name+".jsonnet")
	if r.Method != http.MethodPost || name == "" || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	if _, err := os.Stat(file); err != nil {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	vm := jsonnet.MakeVM()
	vm.TLACode("request", string(body))
	out, err := vm.EvaluateFile(file)
	if err != nil {
		log.Printf("%s: %v", file, err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, out)
}
