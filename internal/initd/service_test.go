package initd

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

func TestParseService(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want api.ServiceDefinition
		err  string // prefix of the error; "" for none
	}{
		{in: `{"name":"web","cmd":["python3","-m","http.server"]}`,
			want: api.ServiceDefinition{Name: "web", Cmd: []string{"python3", "-m", "http.server"}, Restart: "on-failure"}},
		{in: `{"name":"a.b_c-9","cmd":["x"],"env":{"K":"v=1"},"dir":"/srv","restart":"always"}` + "\n",
			want: api.ServiceDefinition{Name: "a.b_c-9", Cmd: []string{"x"}, Env: map[string]string{"K": "v=1"}, Dir: "/srv", Restart: "always"}},
		{in: `{"name":"n","cmd":["x"],"restart":"no"}`, want: api.ServiceDefinition{Name: "n", Cmd: []string{"x"}, Restart: "no"}},
		{in: `{"name":"` + strings.Repeat("a", 63) + `","cmd":["x"]}`,
			want: api.ServiceDefinition{Name: strings.Repeat("a", 63), Cmd: []string{"x"}, Restart: "on-failure"}},

		{in: ``, err: "bad JSON: EOF"},
		{in: `not json`, err: "bad JSON: invalid character"},
		{in: `{"name":"x","cmd":["x"]}{}`, err: "bad JSON: data after the definition"},
		{in: `{"name":"x","cmd":["x"],"restrat":"no"}`, err: `bad JSON: json: unknown field "restrat"`},
		{in: `{"name":"x","cmd":"ls"}`, err: "bad JSON: json: cannot unmarshal"},
		{in: `{"cmd":["x"]}`, err: `invalid name ""`},
		{in: `{"name":"Web","cmd":["x"]}`, err: `invalid name "Web"`},
		{in: `{"name":"../x","cmd":["x"]}`, err: `invalid name "../x"`},
		{in: `{"name":".x","cmd":["x"]}`, err: `invalid name ".x"`},
		{in: `{"name":"` + strings.Repeat("a", 64) + `","cmd":["x"]}`, err: `invalid name`},
		{in: `{"name":"x"}`, err: "no cmd"},
		{in: `{"name":"x","cmd":[""]}`, err: "no cmd"},
		{in: `{"name":"x","cmd":["a\u0000b"]}`, err: "cmd: NUL byte"},
		{in: `{"name":"x","cmd":["x"],"env":{"A=B":"c"}}`, err: `env: invalid variable "A=B"`},
		{in: `{"name":"x","cmd":["x"],"env":{"":"c"}}`, err: `env: invalid variable ""`},
		{in: `{"name":"x","cmd":["x"],"dir":"srv"}`, err: `dir "srv" is not an absolute path`},
		{in: `{"name":"x","cmd":["x"],"restart":"sometimes"}`, err: `restart "sometimes": must be always, on-failure or no`},
	} {
		got, err := parseService([]byte(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.err == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("%s: got %+v, want %+v", tc.in, got, tc.want)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q…", tc.in, err, tc.err)
		}
	}
}

func TestServiceExecRequest(t *testing.T) {
	got := execRequest(api.ServiceDefinition{Name: "x", Cmd: []string{"a", "b"}, Env: map[string]string{"Z": "1", "A": "2"}, Dir: "/d"})
	want := api.ExecRequest{Command: []string{"a", "b"}, Env: []string{"A=2", "Z=1"}, Dir: "/d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
