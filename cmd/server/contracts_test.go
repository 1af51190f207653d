package main

import (
	"net/http"
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// TestServedContractsValidate reads the two contracts the server serves as
// YAML, and an unknown path's 404, through the contracts themselves
// (kin-openapi's response validation): the YAML bodies match their
// documented schema, the 404 the UnknownPath problem.
func TestServedContractsValidate(t *testing.T) {
	ts := trellistest.Start(t, setup(&samples{}),
		trellistest.WithConfig(func(c *trellis.Config) { c.AdminToken = outageToken }),
		trellistest.WithServiceOptions(trellis.WithContract(contract.Spec)))
	validateAgainstContracts(t, ts)
	for _, rt := range []storeRoute{
		{method: http.MethodGet, path: "/openapi.yaml"},
		{method: http.MethodGet, path: "/admin/openapi.yaml", admin: true},
		{method: http.MethodGet, path: "/no/such/path"},
	} {
		resp, _, err := callRoute(ts, rt, "")
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusOK
		if rt.path == "/no/such/path" {
			want = http.StatusNotFound
		}
		if resp.Status != want {
			t.Errorf("GET %s: %d %s, want %d", rt.path, resp.Status, resp.Body, want)
		}
	}
}
