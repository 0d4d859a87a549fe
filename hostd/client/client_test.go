package client

import (
	"strings"
	"testing"
)

func TestNewHTTPTakesLoopbackOnly(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{"127.0.0.1:9400", "http://127.0.0.1:9400"},
		{"http://127.0.0.1:9400", "http://127.0.0.1:9400"},
		{"http://127.0.0.2:9400/", "http://127.0.0.2:9400"},
		{"http://[::1]:9400", "http://[::1]:9400"},
		{"http://LOCALHOST:1", "http://LOCALHOST:1"},
		{"http://example.com:9400", ""},
		{"http://10.0.0.1:9400", ""},
		{"https://127.0.0.1:9400", ""},
		{"http://127.0.0.1", ""},
		{"http://127.0.0.1:9400/v1", ""},
		{"http://u:p@127.0.0.1:9400", ""},
		{"http://127.0.0.1:9400?x=1", ""},
		{"unix:///tmp/s", ""},
		{"", ""},
	}
	for _, tt := range tests {
		c, err := NewHTTP(tt.addr, "tok", "test")
		switch {
		case tt.want == "" && (err == nil || !strings.Contains(err.Error(), "must be http://127.0.0.1:PORT, http://[::1]:PORT or http://localhost:PORT")):
			t.Errorf("NewHTTP(%q) = %v, want refused", tt.addr, err)
		case tt.want != "" && (err != nil || c.Where() != tt.want):
			t.Errorf("NewHTTP(%q) = %v, %v; want %s", tt.addr, c, err, tt.want)
		}
	}
}
