package jobs

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
)

func TestBundleOptions(t *testing.T) {
	cases := []struct {
		name    string
		in      mgmtclient.BundleParams
		want    debugbundle.Options
		wantErr bool
	}{
		{"defaults", mgmtclient.BundleParams{}, debugbundle.Options{}, false},
		{"timed", mgmtclient.BundleParams{For: true, ForMinutes: 5, LogFileCount: 3}, debugbundle.Options{CollectFor: 5 * time.Minute, LogFileCount: 3}, false},
		{"time ignored without bundle_for", mgmtclient.BundleParams{ForMinutes: 9}, debugbundle.Options{}, false},
		{"anonymize default", mgmtclient.BundleParams{Anonymize: true, AnonymizeLevel: "Default"}, debugbundle.Options{Anonymize: true}, false},
		{"anonymize strict", mgmtclient.BundleParams{Anonymize: true, AnonymizeLevel: "strict"}, debugbundle.Options{Anonymize: true, Strict: true}, false},
		{"unknown level is strict", mgmtclient.BundleParams{Anonymize: true, AnonymizeLevel: "paranoid"}, debugbundle.Options{Anonymize: true, Strict: true}, false},
		{"time 0", mgmtclient.BundleParams{For: true}, debugbundle.Options{}, true},
		{"time 6", mgmtclient.BundleParams{For: true, ForMinutes: 6}, debugbundle.Options{}, true},
		{"negative logs", mgmtclient.BundleParams{LogFileCount: -1}, debugbundle.Options{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := BundleOptions(&c.in)
			if c.wantErr {
				if !errors.Is(err, ErrBadParams) {
					t.Fatalf("BundleOptions(%+v) = %v, want ErrBadParams", c.in, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
