package termsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// String returns s with every character a terminal would act on written
// out as a Go escape: control characters (C0 such as "\n", "\r", "\t",
// "\x1b", "\a"; DEL as "\x7f"; C1 such as "\u0085" and "\u009b"), format
// and separator characters that are not plain spaces (bidirectional
// overrides, "\u2028", zero-width ones) and each byte of invalid UTF-8
// ("\xff"). Printable characters, Unicode included, and the ASCII space
// stay as they are; so does a backslash, so the result reads as text, not
// as a Go literal (it is not reversible, and need not be: -o json keeps
// the bytes). The result is valid UTF-8 and holds no control character.
func String(s string) string {
	if safe(s, false) {
		return s
	}
	return escape(s, false)
}

// Lines is String for messages of several lines: it keeps each "\n" as a
// line break and escapes everything else String does, "\r" included.
func Lines(s string) string {
	if safe(s, true) {
		return s
	}
	return escape(s, true)
}

// safe reports whether s needs no escaping.
func safe(s string, newlines bool) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return needsEscape(r, newlines) })
}

// needsEscape reports whether the (valid) character r is written out.
func needsEscape(r rune, newlines bool) bool {
	return !strconv.IsPrint(r) && (r != '\n' || !newlines)
}

func escape(s string, newlines bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1: // a byte of invalid UTF-8
			b.WriteString(`\x`)
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&0xf])
		case needsEscape(r, newlines):
			q := strconv.QuoteRune(r) // '\x1b', '\n', '\u0085'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

const hex = "0123456789abcdef"
