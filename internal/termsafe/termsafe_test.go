package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "python train.py --lr 0.1", "python train.py --lr 0.1"},
		{"empty", "", ""},
		{"unicode stays", "naïve 日本語 ✓ ü", "naïve 日本語 ✓ ü"},
		{"backslash stays", `printf 'a\n'`, `printf 'a\n'`},
		{"quotes stay", `say "hi" 'there'`, `say "hi" 'there'`},
		{"newline", "a\nb", `a\nb`},
		{"fake row", "sleep 1\n1234 fake-row running", `sleep 1\n1234 fake-row running`},
		{"carriage return", "ok\rEVIL", `ok\rEVIL`},
		{"tab", "a\tb", `a\tb`},
		{"OSC title", "\x1b]0;pwn\x07", `\x1b]0;pwn\a`},
		{"CSI colour", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"CSI clear", "\x1b[2J", `\x1b[2J`},
		{"NUL", "a\x00b", `a\x00b`},
		{"backspace", "a\bb", `a\bb`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"no-break space", "a\u00a0b", `a\u00a0b`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"lone continuation byte", "\x9b2J", `\x9b2J`},
		{"encoded surrogate", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"replacement char stays", "a\uFFFDb", "a\uFFFDb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestLines(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "one line", "one line"},
		{"lines kept", "first\nsecond\n", "first\nsecond\n"},
		{"CR escaped", "first\r\nsecond", "first\\r\nsecond"},
		{"escapes", "job-1: \x1b]0;pwn\x07\n\x1b[2J", "job-1: \\x1b]0;pwn\\a\n\\x1b[2J"},
		{"invalid UTF-8", "\xfe\n", "\\xfe\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Lines(tc.in); got != tc.want {
				t.Errorf("Lines(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzString checks what String promises for any input: valid UTF-8, no
// control character, unchanged when nothing needed escaping, and stable
// (escaping the result again changes nothing).
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\nb", "\x1b]0;t\x07", "\xff\xfe", "\u0085\u202e", "日本\x00語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q: not valid UTF-8", s, got)
		}
		for _, r := range got {
			if r < 0x20 || (r >= 0x7f && r < 0xa0) {
				t.Fatalf("String(%q) = %q: holds control character %U", s, got, r)
			}
		}
		if String(got) != got {
			t.Fatalf("String(%q) = %q, but String of that changes it again", s, got)
		}
		if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) &&
			utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r >= 0x80 }) && got != s {
			t.Fatalf("String(%q) = %q: printable ASCII must stay as it is", s, got)
		}
	})
}
