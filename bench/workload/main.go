// Command workload calls one small function in a loop and prints how long
// a call takes, one measured round per line read on stdin, so that probes can
// be attached between rounds. It prints its PID first.
//
// Usage: workload [-n CALLS] [-f theFunc|theFramed]
//
// Output: "pid PID", then for each input line "round CALLS NS_PER_CALL".
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"time"
)

var sink int

// theFunc has two return paths, taken alternately, so a probe sits on each
// of its two RET instructions; the body is trivial so the probes dominate.
//
//go:noinline
func theFunc(i int) int {
	if i&1 == 0 {
		return i + 1
	}
	return i ^ 0x55
}

// theFramed is theFunc with a frame: it calls a function on one path, so it
// begins with Go's stack check (cmp; jbe to its morestack block) and then
// pushes %rbp, where its entry probe goes.
//
//go:noinline
func theFramed(i int) int {
	if i&1 == 0 {
		return leaf(i) + 1
	}
	return i ^ 0x55
}

//go:noinline
func leaf(i int) int {
	return i * 3
}

func round(n int, f func(int) int) float64 {
	s := 0
	start := time.Now()
	for i := 0; i < n; i++ {
		s += f(i)
	}
	elapsed := time.Since(start)
	sink += s
	return float64(elapsed.Nanoseconds()) / float64(n)
}

func main() {
	n := flag.Int("n", 200000, "calls per round")
	name := flag.String("f", "theFunc", "the function called: theFunc or theFramed")
	flag.Parse()
	f := theFunc
	if *name == "theFramed" {
		f = theFramed
	}
	fmt.Printf("pid %d\n", os.Getpid())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Printf("round %d %.1f\n", *n, round(*n, f))
	}
	if sink == 42 {
		fmt.Println()
	}
}
