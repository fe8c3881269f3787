package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// CORS: browsers on the configured dashboard origins may call the API
// cross-origin; every other origin gets no CORS header at all, so the
// browser refuses to hand it the response. None is allowed by default.

// corsMethods and corsHeaders are what a preflight may ask for.
var (
	corsMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete}
	corsHeaders = []string{"Authorization", "Content-Type"}
)

type cors struct{ origins []string }

func newCORS(origins []string) cors {
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		out = append(out, strings.ToLower(strings.TrimSuffix(o, "/")))
	}
	return cors{origins: out}
}

// ParseOrigins checks dashboard origins given as a repeatable or
// comma-separated flag: each must be scheme://host[:port] with scheme http
// or https and nothing after the authority. It returns them normalised
// (lower case, no trailing slash), without duplicates.
func ParseOrigins(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for o := range strings.SplitSeq(v, ",") {
			o = strings.TrimSpace(o)
			if o == "" {
				continue
			}
			u, err := url.Parse(o)
			if err != nil {
				return nil, fmt.Errorf("dashboard origin %q: %w", o, err)
			}
			if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.User != nil ||
				(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(u.Host, ":") {
				return nil, fmt.Errorf("dashboard origin %q: want scheme://host[:port] with scheme http or https, e.g. https://dashboard.example.com", o)
			}
			if p := u.Port(); p != "" {
				if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
					return nil, fmt.Errorf("dashboard origin %q: port %q is not 1-65535", o, p)
				}
			}
			n := strings.ToLower(u.Scheme + "://" + u.Host)
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

func (c cors) allowed(origin string) bool {
	return origin != "" && slices.Contains(c.origins, strings.ToLower(origin))
}

// handle sets the CORS headers of an allowed origin and answers its
// preflight; it reports whether the request has been answered.
func (c cors) handle(w http.ResponseWriter, r *http.Request) bool {
	if len(c.origins) == 0 {
		return false
	}
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !c.allowed(origin) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	if !preflight {
		h.Set("Access-Control-Expose-Headers", "X-Request-Id")
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", strings.Join(corsMethods, ", "))
	h.Set("Access-Control-Allow-Headers", strings.Join(corsHeaders, ", "))
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}
