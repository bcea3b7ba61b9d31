package testkit

import (
	"net"
	"testing"

	"google.golang.org/grpc"
)

// ServeGRPC serves a gRPC server with the services register adds on a new 127.0.0.1 port until
// the test ends, and returns its address.
func ServeGRPC(t testing.TB, register func(*grpc.Server)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return l.Addr().String()
}
