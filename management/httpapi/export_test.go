package httpapi

// PermOf exposes a route's permission to the route x role test.
func PermOf(r Route) (module, op string, self, every, ok bool) {
	p, ok := permOf(r)
	return string(p.module), string(p.op), p.self, p.every, ok
}

// PermEntries lists the keys of the permission table.
func PermEntries() []string {
	out := make([]string, 0, len(routePerms))
	for k := range routePerms {
		out = append(out, k)
	}
	return out
}
