package httpapi

import (
	"bytes"
	_ "embed"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// openAPIDoc is the OpenAPI 3 document of this API. A test walks every
// route of the table below against it and every operation of it against
// the table, and drives each operation checking the response against the
// document's schema, so the two cannot drift.
//
//go:embed openapi.json
var openAPIDoc []byte

// Route is one operation of the API, named as openapi.json names it.
type Route struct {
	Method string // GET, POST, PUT or DELETE
	Path   string // the document's template, e.g. /api/peers/{peerId}
	// Public routes need no Authorization header.
	Public bool
}

// route is a Route with its handler and its path split into segments.
type route struct {
	Route
	segs []string // "{name}" for a parameter
	h    handler
}

// add appends a route given as "METHOD /api/path/{param}". Public routes
// get the zero caller.
func (a *API) add(pattern string, public bool, h handler) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || !strings.HasPrefix(path, "/api/") {
		panic(fmt.Sprintf("httpapi: bad route pattern %q", pattern))
	}
	rt := route{Route: Route{Method: method, Path: path, Public: public}, segs: strings.Split(strings.TrimPrefix(path, "/"), "/"), h: h}
	for _, o := range a.table {
		if o.Method == method && sameShape(o.segs, rt.segs) {
			panic(fmt.Sprintf("httpapi: route %q registered twice (as %s %s)", pattern, o.Method, o.Path))
		}
	}
	a.table = append(a.table, rt)
}

// Routes lists every operation the API serves, in registration order.
func (a *API) Routes() []Route {
	out := make([]Route, 0, len(a.table))
	for _, rt := range a.table {
		out = append(out, rt.Route)
	}
	return out
}

func isParam(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

func sameShape(a, b []string) bool {
	return slices.EqualFunc(a, b, func(x, y string) bool { return x == y || (isParam(x) && isParam(y)) })
}

// match tells whether the route's template matches the unescaped segments.
func (rt *route) match(segs []string) bool {
	if len(segs) != len(rt.segs) {
		return false
	}
	for i, s := range rt.segs {
		if isParam(s) {
			if segs[i] == "" {
				return false
			}
		} else if s != segs[i] {
			return false
		}
	}
	return true
}

// moreSpecific orders two matching templates: at the first segment where
// they differ, a literal beats a parameter (GET /api/users/invites/{token}
// over GET /api/users/{userId}/tokens for /api/users/invites/tokens).
func (rt *route) moreSpecific(o *route) bool {
	for i := range rt.segs {
		if p, q := isParam(rt.segs[i]), isParam(o.segs[i]); p != q {
			return !p
		}
	}
	return false
}

// errNoMethod answers a path served under other methods: 405 with Allow.
type errNoMethod struct{ allow []string }

func (e errNoMethod) Error() string {
	return fmt.Sprintf("method not allowed; this path answers %s", strings.Join(e.allow, ", "))
}

// dispatch finds the request's route, sets its path values, authenticates
// the caller unless the route is public and runs the handler.
func (a *API) dispatch(w http.ResponseWriter, r *http.Request) error {
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return errNoRoute
		}
		segs[i] = u
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	var best *route
	var allow []string
	for i := range a.table {
		rt := &a.table[i]
		if !rt.match(segs) {
			continue
		}
		if !slices.Contains(allow, rt.Method) {
			allow = append(allow, rt.Method)
		}
		if rt.Method == method && (best == nil || rt.moreSpecific(best)) {
			best = rt
		}
	}
	if best == nil {
		if len(allow) == 0 {
			return errNoRoute
		}
		if slices.Contains(allow, http.MethodGet) {
			allow = append(allow, http.MethodHead)
		}
		return errNoMethod{allow: allow}
	}
	for i, s := range best.segs {
		if isParam(s) {
			r.SetPathValue(s[1:len(s)-1], segs[i])
		}
	}
	var caller account.User
	if !best.Public {
		var err error
		if caller, err = a.authenticate(r); err != nil {
			return err
		}
		if err = authorize(best.Route, caller); err != nil {
			return err
		}
	}
	if err := best.h(w, r, caller); err != nil {
		return err
	}
	a.announce(best.Route, caller)
	return nil
}

// openAPI serves openapi.json.
func (a *API) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	http.ServeContent(w, r, "openapi.json", time.Time{}, bytes.NewReader(openAPIDoc))
	return nil
}
