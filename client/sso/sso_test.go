package sso_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/client/sso"
	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

var bob = testoidc.User{Subject: "bob", Email: "bob@example.com", Name: "Bob", Password: "bob-password"}

func config(p *testoidc.Provider, redirect string) *mgmtpb.ProviderConfig {
	ep := p.Endpoints()
	return &mgmtpb.ProviderConfig{ClientID: testoidc.ClientID, Audience: testoidc.ClientID, Scope: "openid email",
		TokenEndpoint: ep.Token, DeviceAuthEndpoint: ep.DeviceAuthorization, AuthorizationEndpoint: ep.Authorization,
		RedirectURLs: []string{redirect}}
}

func TestDeviceFlow(t *testing.T) {
	p := testoidc.Start(t, "", bob)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := sso.StartDevice(ctx, config(p, ""))
	if err != nil {
		t.Fatal(err)
	}
	pr := f.Prompt()
	if pr.UserCode == "" || pr.VerificationURI == "" {
		t.Fatalf("prompt %+v", pr)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		if err := testoidc.ApproveDevice(nil, pr.VerificationURI, pr.UserCode, bob.Email, bob.Password); err != nil {
			t.Error(err)
		}
	}()
	tok, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok.JWT == "" || tok.Email != bob.Email {
		t.Fatalf("token %+v", tok)
	}
}

func TestPKCEFlow(t *testing.T) {
	p := testoidc.Start(t, "", bob)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := sso.StartPKCE(ctx, config(p, fmt.Sprintf("http://localhost:%d/", port)))
	if err != nil {
		t.Fatal(err)
	}
	back := testoidc.BrowserLogin(t, f.Prompt().VerificationURIComplete, bob.Email, bob.Password)
	resp, err := http.Get(back.String()) // the browser lands on the agent's callback
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tok, err := f.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok.JWT == "" || tok.Email != bob.Email {
		t.Fatalf("token %+v", tok)
	}
}

func TestIncompleteConfigRefused(t *testing.T) {
	ctx := context.Background()
	if _, err := sso.StartDevice(ctx, &mgmtpb.ProviderConfig{ClientID: "x"}); err == nil {
		t.Fatal("device flow without endpoints started")
	}
	if _, err := sso.StartPKCE(ctx, &mgmtpb.ProviderConfig{ClientID: "x", TokenEndpoint: "http://127.0.0.1:1/t", AuthorizationEndpoint: "http://127.0.0.1:1/a"}); err == nil {
		t.Fatal("PKCE flow without redirect URLs started")
	}
}
