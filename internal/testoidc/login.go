package testoidc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// ApproveDevice does what a person does with the URL and code a device
// shows: opens the verification page, logs in and approves. It uses only
// the provider's public pages, through c (nil: a default client).
func ApproveDevice(c *http.Client, verificationURI, userCode, email, password string) error {
	if c == nil {
		c = &http.Client{}
	}
	resp, err := c.Get(verificationURI + "?user_code=" + url.QueryEscape(userCode))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("device page: %s", resp.Status)
	}
	form := url.Values{"user_code": {userCode}, "email": {email}, "password": {password}}
	resp, err = c.PostForm(verificationURI, form)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Device approved") {
		return fmt.Errorf("approve device: %s: %s", resp.Status, body)
	}
	return nil
}

// BrowserLogin follows an authorization URL like a browser: it logs in on
// the provider's page and follows redirects until they leave the provider,
// returning the final redirect (the client's callback with code and state)
// without fetching it.
func BrowserLogin(t testing.TB, authURL, email, password string) *url.URL {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var final *url.URL
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != via[0].URL.Host {
			final = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatalf("open authorization URL: %v", err)
	}
	resp.Body.Close()
	if final != nil {
		return final
	}
	loginURL := resp.Request.URL
	id := loginURL.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("authorization did not lead to the login page: %s (%s)", loginURL, resp.Status)
	}
	post, _ := url.Parse(loginURL.String())
	post.RawQuery = ""
	resp, err = c.PostForm(post.String(), url.Values{"authRequestID": {id}, "email": {email}, "password": {password}})
	if err != nil {
		t.Fatalf("log in: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if final == nil {
		t.Fatalf("login did not return to the client: %s: %s", resp.Status, body)
	}
	return final
}
