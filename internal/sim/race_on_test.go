//go:build race

package sim

// raceDetector reports whether the test binary runs with the race
// detector, which perturbs goroutine scheduling on purpose.
const raceDetector = true
