package account_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
)

// codeLike is a string literal shaped like an activity code.
var codeLike = regexp.MustCompile(`^(peer|user|group|policy|rule|setupkey|posture|account|service|personal|dns|nameserver|route|network|resource|integration|identityprovider|transferred|dashboard)\.[a-z.]+$`)

// TestRecordedActivityCodesAreKnown walks management's sources: every
// string shaped like an activity code must be in account.Activities, so a
// code the dashboard does not know cannot slip in.
func TestRecordedActivityCodesAreKnown(t *testing.T) {
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			filepath.Base(path) == "activity.go" {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !codeLike.MatchString(s) {
				return true
			}
			seen++
			if _, ok := account.Activities[s]; !ok {
				t.Errorf("%s: activity code %q is not in account.Activities (SPEC-rest.md section 13)", fset.Position(lit.Pos()), s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 30 {
		t.Fatalf("found only %d activity codes in management's sources: the walk is broken", seen)
	}
}

// TestSettingsEvents: every settings field that changes gives an event
// whose code is known; the spec's switches give their own codes.
func TestSettingsEvents(t *testing.T) {
	base := account.DefaultSettings()
	// Walk the fields on a copy, compare each one-field change with base.
	s := reflect.ValueOf(&base).Elem()
	var check func(v reflect.Value, name string)
	check = func(v reflect.Value, name string) {
		for i := range v.NumField() {
			f, n := v.Field(i), name+v.Type().Field(i).Name
			if f.Kind() == reflect.Struct {
				check(f, n+".")
				continue
			}
			old := reflect.ValueOf(f.Interface())
			switch f.Kind() {
			case reflect.Bool:
				f.SetBool(!f.Bool())
			case reflect.Int64, reflect.Int:
				f.SetInt(f.Int() + 60)
			case reflect.String:
				f.SetString(f.String() + "x")
			case reflect.Slice:
				f.Set(reflect.Append(f, reflect.ValueOf("g").Convert(f.Type().Elem())))
			default:
				t.Fatalf("settings field %s of kind %s: teach this test to change it", n, f.Kind())
			}
			changed := base
			f.Set(old)
			evs := account.SettingsEvents(base, changed)
			if len(evs) != 1 {
				t.Errorf("changing %s gives events %+v, want one", n, evs)
			}
			for _, e := range evs {
				if _, ok := account.Activities[e.Activity]; !ok {
					t.Errorf("changing %s gives code %q, not in account.Activities", n, e.Activity)
				}
			}
		}
	}
	check(s, "")
	if evs := account.SettingsEvents(base, base); len(evs) != 0 {
		t.Errorf("no change gives %+v", evs)
	}
	on, off := base, base
	on.PeerLoginExpirationEnabled, off.PeerLoginExpirationEnabled = true, false
	if evs := account.SettingsEvents(on, off); len(evs) != 1 || evs[0].Activity != "account.setting.peer.login.expiration.disable" {
		t.Errorf("turning login expiration off: %+v", evs)
	}
	longer := base
	longer.PeerLoginExpiration = base.PeerLoginExpiration * 2
	if evs := account.SettingsEvents(base, longer); len(evs) != 1 || evs[0].Activity != "account.setting.peer.login.expiration.update" ||
		evs[0].Meta["new"] != strconv.FormatInt(longer.PeerLoginExpiration, 10) {
		t.Errorf("changing the login expiration: %+v", evs)
	}
}
