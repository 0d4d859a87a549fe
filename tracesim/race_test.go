//go:build race

package tracesim

// raceDetector is true when the tests are built with -race (openbDir).
const raceDetector = true
