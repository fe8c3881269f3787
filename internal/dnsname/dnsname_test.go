package dnsname

import "testing"

func TestCoverage(t *testing.T) {
	cases := []struct {
		pattern, name string
		covers        bool
	}{
		{"*.corp.test", "corp.test", true},
		{"*.corp.test", "a.b.corp.test", true},
		{"*.Corp.Test.", "db.corp.test", true},
		{"*.corp.test", "evilcorp.test", false},
		{"*.corp.test", "test", false},
		{"app.corp.test", "app.corp.test", true},
		{"App.Corp.Test.", "app.corp.test", true},
		{"app.corp.test", "x.app.corp.test", false},
	}
	for _, c := range cases {
		if got := Covers(c.pattern, c.name); got != c.covers {
			t.Errorf("Covers(%q, %q) = %v, want %v", c.pattern, c.name, got, c.covers)
		}
	}
	if !(Coverage("app.corp.test", "app.corp.test") > Coverage("*.app.corp.test", "app.corp.test")) {
		t.Error("an exact pattern must beat a wildcard")
	}
	if !(Coverage("*.svc.corp.test", "db.svc.corp.test") > Coverage("*.corp.test", "db.svc.corp.test")) {
		t.Error("the longer wildcard base must win")
	}
	if got := Base("*.Corp.Test."); got != "corp.test" {
		t.Errorf("Base = %q", got)
	}
}
