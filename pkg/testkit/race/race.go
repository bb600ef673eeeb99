// Package race releases goroutines together so that a test can count how many
// of them got through a guard: the shape of every concurrency claim here.
package race

import (
	"sync"
	"sync/atomic"
)

// Run releases n goroutines at once, each calling try once, and counts the
// calls that returned true. The first error any call returned is returned
// with the count.
func Run(n int, try func() (bool, error)) (int, error) {
	var passed atomic.Int32
	var firstErr error
	var errOnce sync.Once
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := try()
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			if ok {
				passed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(passed.Load()), firstErr
}
