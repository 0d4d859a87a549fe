package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type item struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

type file struct {
	Version int    `json:"version"`
	Items   []item `json:"items"`
}

func testFormat() Format { return Format{Name: "test journal", Version: 3} }

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          string // error text; "" for a file read
		found         bool
	}{
		{name: "round", content: `{"version":3,"items":[{"name":"a","n":1}]}`, found: true},
		{name: "missing"},
		{name: "damaged", content: `{"version":3,"items":[`, want: "unexpected end of JSON input"},
		{name: "trailing", content: `{"version":3,"items":[]} {}`, want: "invalid character '{' after top-level value"},
		{name: "not an object", content: `[1]`, want: "cannot unmarshal array"},
		{name: "wrong type", content: `{"version":3,"items":[{"name":"a","n":"1"}]}`, want: "cannot unmarshal string"},
		{name: "older", content: `{"version":2,"items":[]}`, want: "version: must be 3, got 2"},
		{name: "no version", content: `{"items":[]}`, want: "version: must be 3, got 0"},
		// A newer file's new field is not what refuses it: its version is.
		{name: "newer", content: `{"version":4,"items":[],"added":true}`, want: "version: must be 3, got 4"},
		{name: "unknown top", content: `{"version":3,"items":[],"added":true}`, want: `unknown field "added"`},
		{name: "unknown nested", content: `{"version":3,"items":[{"name":"a","extra":1}]}`, want: `unknown field "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if tc.content != "" {
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got := file{Items: []item{{Name: "untouched"}}}
			found, err := testFormat().Load(path, &got)
			if tc.want != "" {
				if err == nil || found {
					t.Fatalf("Load accepted %s: %+v", tc.content, got)
				}
				if prefix := "test journal " + path + ": "; !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q, want one starting %q and saying %q", err, prefix, tc.want)
				}
				return
			}
			if err != nil || found != tc.found {
				t.Fatalf("Load: found %v, %v; want found %v", found, err, tc.found)
			}
			want := "untouched"
			if tc.found {
				want = "a"
			}
			if len(got.Items) != 1 || got.Items[0].Name != want {
				t.Errorf("read %+v, want one item %q", got, want)
			}
		})
	}
	// A path that cannot be read (a folder) is an error naming the kind of
	// file, with the operating system's error naming the path.
	if _, err := testFormat().Load(dir, &file{}); err == nil || !strings.HasPrefix(err.Error(), "test journal: ") || !strings.Contains(err.Error(), dir) {
		t.Errorf("Load of a folder: %v", err)
	}
}

func TestSaveRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	for _, items := range [][]item{{{Name: "a", N: 1}, {Name: "b", N: 2}}, nil, {{Name: "c"}}} {
		if err := testFormat().Save(path, file{Version: 3, Items: items}); err != nil {
			t.Fatal(err)
		}
		var got file
		if found, err := testFormat().Load(path, &got); err != nil || !found {
			t.Fatalf("Load after Save: found %v, %v", found, err)
		}
		if len(got.Items) != len(items) || (len(items) > 0 && got.Items[0] != items[0]) {
			t.Errorf("read back %+v, want items %+v", got, items)
		}
	}
	data, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(data), "}\n") {
		t.Errorf("file does not end in a newline: %q", data)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}

// A Save that fails leaves the file as it was and nothing temporary.
func TestSaveFailureKeepsTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	old := file{Version: 3, Items: []item{{Name: "old"}}}
	if err := testFormat().Save(path, old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"unencodable", struct {
			Version int        `json:"version"`
			F       func() int `json:"f"`
		}{3, nil}, "encode test journal: json: unsupported type"},
		{"wrong version", file{Version: 2}, "encode test journal: version: must be 3, got 2"},
		{"no version", file{}, "encode test journal: version: must be 3, got 0"},
		{"not an object", []int{3}, "encode test journal: must be a JSON object with a version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := testFormat().Save(path, tc.v); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save: %v, want an error saying %q", err, tc.want)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("file changed to %q", after)
			}
		})
	}
	// A folder in the way of the rename: the write fails, nothing is left.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := testFormat().Save(blocked, old); err == nil || !strings.HasPrefix(err.Error(), "test journal: replace "+blocked) {
		t.Errorf("Save over a folder: %v", err)
	}
	if err := testFormat().Save(filepath.Join(dir, "missing", "state.json"), old); err == nil || !strings.HasPrefix(err.Error(), "test journal: ") {
		t.Errorf("Save into a missing folder: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("folder holds %v, want the file and the blocking folder alone", entries)
	}
}

func TestLoadRefusesALink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	if err := os.WriteFile(real, []byte(`{"version":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "state.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Version int `json:"version"`
	}
	_, err := Format{Name: "checkpoint", Version: 1}.Load(link, &v)
	if err == nil || !strings.Contains(err.Error(), link+" is a symbolic link") {
		t.Errorf("Load of a link: %v, want a refusal naming it", err)
	}
}
