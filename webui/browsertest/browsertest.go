// Package browsertest drives the web UI (package webui) in a real headless
// Chromium from Go tests, through chromedp: the host view's tests
// (hostd/server) and the cluster view's (kube/clusterview) use it.
//
// A test calls New. Without a browser it is skipped, saying how to get
// one, unless TESSERA_REQUIRE_BROWSER is set (to anything but "" or "0"):
// then it fails. .ci/run installs Debian's chromium and sets it, so CI
// never passes a browser test by skipping it. TESSERA_CHROMIUM names the
// browser binary when it is not chromium (or chromium-browser,
// google-chrome, google-chrome-stable) on PATH.
//
// Every message the page writes to the console at level error, and every
// uncaught exception, is kept: CheckConsole fails the test on any.
// Screenshots go to the test's artifact folder (t.ArtifactDir; kept with
// go test -artifacts -outputdir DIR); DocScreenshot also writes the
// documentation's images to TESSERA_SCREENSHOTS_DIR when it is set.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Environment variables the package reads.
const (
	// RequireEnv makes a missing browser a failure instead of a skip.
	RequireEnv = "TESSERA_REQUIRE_BROWSER"
	// PathEnv names the browser binary.
	PathEnv = "TESSERA_CHROMIUM"
	// ScreenshotsEnv names a folder that DocScreenshot also writes to
	// (the documentation's images: docs/images).
	ScreenshotsEnv = "TESSERA_SCREENSHOTS_DIR"
)

// candidates are the names the browser is looked up by on PATH.
var candidates = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Find returns the browser binary: PathEnv's, else the first candidate on
// PATH.
func Find() (string, error) {
	if p := os.Getenv(PathEnv); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", PathEnv, p, err)
		}
		return path, nil
	}
	for _, name := range candidates {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("no browser found: none of %s is on PATH and %s is not set", strings.Join(candidates, ", "), PathEnv)
}

// Required reports whether a missing browser must fail the test.
func Required() bool {
	v := os.Getenv(RequireEnv)
	return v != "" && v != "0"
}

// Browser is a headless Chromium with one tab, for one test.
type Browser struct {
	t testing.TB
	// Ctx is the tab's chromedp context.
	Ctx context.Context

	mu       sync.Mutex
	problems []string
	// ended is set once the test is over: t.Logf may no longer be called.
	ended bool
}

// logf logs to the test while it runs (the browser's goroutines may
// report after it ended).
func (b *Browser) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended {
		b.t.Logf(format, args...)
	}
}

// New starts a headless browser for t, closed when t ends. It skips t, or
// fails it when Required, if there is no browser; it fails t if the
// browser does not start.
func New(t testing.TB) *Browser {
	t.Helper()
	path, err := Find()
	if err != nil {
		if Required() {
			t.Fatalf("%v; %s is set, so the browser tests must run: install it (apt-get install chromium, as .ci/run does)", err, RequireEnv)
		}
		t.Skipf("skipping the browser test: %v (apt-get install chromium; set %s=1 to fail instead of skipping)", err, RequireEnv)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1440, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox.
		opts = append(opts, chromedp.NoSandbox)
	}
	b := &Browser{t: t}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithErrorf(b.logf))
	b.Ctx = ctx
	t.Cleanup(func() {
		b.mu.Lock()
		b.ended = true
		b.mu.Unlock()
		cancel()
		cancelAlloc()
	})
	// Start the browser now, with no deadline bound to its life.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleException:
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				b.mu.Unlock()
			default:
				b.logf("browser console: %s", m)
			}
		}
	}()
	return b
}

// Do runs actions with a timeout, failing the test (after a screenshot)
// on an error.
func (b *Browser) Do(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.Screenshot("failed-" + what)
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Run runs one action with a timeout and returns its value, failing the
// test (after a screenshot) on an error.
func Run[T any](b *Browser, what string, timeout time.Duration, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.Screenshot("failed-" + what)
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// Poll waits up to timeout for the JavaScript expression expr to be true
// (checked every 50 ms), failing the test (after a screenshot) when it
// is not.
func (b *Browser) Poll(what, expr string, timeout time.Duration) {
	b.t.Helper()
	Run(b, what, timeout, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond)))
}

// Strings evaluates the JavaScript expression expr, an array of strings.
func (b *Browser) Strings(what, expr string, timeout time.Duration) []string {
	b.t.Helper()
	return Run(b, what, timeout, chromedp.Evaluate[[]string](expr))
}

// Screenshot saves the whole page as NAME.png in the test's artifact
// folder and returns its path ("" when it could not be taken).
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(b.t.ArtifactDir(), fileName(name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// DocScreenshot saves what the window shows (not the whole page) as
// NAME.png in the test's artifact folder and, when ScreenshotsEnv names a
// folder, as FILE there too: the tests take the documentation's
// screenshots (TESSERA_SCREENSHOTS_DIR=docs/images).
func (b *Browser) DocScreenshot(name, file string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	paths := []string{filepath.Join(b.t.ArtifactDir(), fileName(name)+".png")}
	if dir := os.Getenv(ScreenshotsEnv); dir != "" {
		paths = append(paths, filepath.Join(dir, file))
	}
	for _, p := range paths {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			b.t.Errorf("screenshot %s: %v", name, err)
			continue
		}
		b.t.Logf("screenshot: %s (%d KB)", p, len(png)/1024)
	}
}

// fileName makes a screenshot's name (a failed step's, which may hold a
// CSS selector) a file name: characters other than letters, digits, '.',
// '_' and '-' become '_'.
func fileName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, name)
}

// Problems returns the console errors and uncaught exceptions so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// CheckConsole fails the test for every console error and uncaught
// exception so far.
func (b *Browser) CheckConsole() {
	b.t.Helper()
	for _, p := range b.Problems() {
		b.t.Errorf("browser console: %s", p)
	}
}
