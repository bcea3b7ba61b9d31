// Package grpctest serves gRPC services on 127.0.0.1 for the main module's tests. It is apart
// from testkit, which the other modules' tests import too, so that they need no gRPC.
package grpctest

import (
	"net"
	"testing"

	"google.golang.org/grpc"
)

// Serve serves a gRPC server with the services register adds on a new 127.0.0.1 port until
// the test ends, and returns its address.
func Serve(t testing.TB, register func(*grpc.Server)) string {
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
