package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookrelay/hookrelay/internal/proccpu"
)

// measureCeiling posts payload n times from w goroutines with a plain
// net/http client and returns requests/s. A short warm-up opens the
// connections first, as the worker's sender has them open by the time it
// is measured.
func measureCeiling(ctx context.Context, url string, payload []byte, w, n int) (perSec float64, cpu time.Duration, err error) {
	tr := &http.Transport{MaxIdleConns: w, MaxIdleConnsPerHost: w, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	post := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/ceiling", strings.NewReader(string(payload)))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("ceiling: recipient answered %d", resp.StatusCode)
		}
		return nil
	}
	loop := func(total int) (time.Duration, error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, w)
		start := time.Now()
		for range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(total) {
					if err := post(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		return elapsed, <-errs
	}
	if _, err := loop(min(n, 10*w)); err != nil {
		return 0, 0, err
	}
	cpu0 := proccpu.Self()
	elapsed, err := loop(n)
	if err != nil {
		return 0, 0, err
	}
	return float64(n) / elapsed.Seconds(), (proccpu.Self() - cpu0) / time.Duration(n), nil
}
