package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"time"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/testmodel"
	"github.com/flashgo/flashgo/model"
	"github.com/flashgo/flashgo/model/gguf"
)

const generateUsage = `usage: attnbench generate -model FILE [-prompt TEXT] [-n N] [-temp T] [-top-k K] [-top-p P] [-seed S]
                          [-threads N] [-ctx N] [-precision f32|bf16]

generate runs a Llama-family GGUF model (F32, F16, BF16 or Q8_0 weights) with
flashgo's attention engine: it encodes the prompt with BOS, runs it through
the model in one prefill, then samples up to N tokens one at a time (greedy
unless -temp is positive), stopping early at the end-of-sequence token. The
prompt and then each token are printed to stdout as they are produced; the
prefill and decode rates follow on stderr (after a warm-up pass of one
token, which they leave out). Interrupting stops the generation, still
prints the rates (with "stop: interrupted") and exits 1; any other failure
prints its error alone and exits 1.

Flags:
`

// generateContext is the context of a generation: cancelled by an
// interrupt (a variable so that the tests can interrupt).
var generateContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

// generateConfig is what the flags of the generate subcommand ask for.
type generateConfig struct {
	model, prompt string
	n             int
	sampler       model.Sampler
	session       model.SessionOptions
}

func parseGenerate(args []string, stdout io.Writer) (generateConfig, error) {
	fs := flag.NewFlagSet("attnbench generate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var c generateConfig
	fs.StringVar(&c.model, "model", os.Getenv(testmodel.Env), "GGUF model `file` (default $"+testmodel.Env+", the path of the test model, README.md's \"The test model\")")
	fs.StringVar(&c.prompt, "prompt", "", "text to continue (empty: start from BOS alone)")
	fs.IntVar(&c.n, "n", 128, "most tokens to generate")
	temp := fs.Float64("temp", 0, "sampling temperature (0: greedy)")
	fs.IntVar(&c.sampler.TopK, "top-k", 0, "sample from the K most probable tokens (0: all)")
	topP := fs.Float64("top-p", 0, "sample from the nucleus of this probability (0 or 1: all)")
	fs.Uint64Var(&c.sampler.Seed, "seed", 0, "seed of the sampler's random draws")
	fs.IntVar(&c.session.Threads, "threads", 0, "goroutines for attention and projections (0: GOMAXPROCS)")
	fs.IntVar(&c.session.MaxContext, "ctx", 0, "most KV cache positions (0: the model's context length); the cache grows as tokens arrive")
	prec := fs.String("precision", "f32", "compute precision of attention's products: f32 or bf16")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, generateUsage)
			fs.PrintDefaults()
		}
		return c, err
	}
	c.sampler.Temperature, c.sampler.TopP = float32(*temp), float32(*topP)
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.model == "":
		return c, errors.New("-model is required (or set " + testmodel.Env + " to a model's path)")
	case c.n < 0:
		return c, fmt.Errorf("-n is %d; want >= 0", c.n)
	case c.session.Threads < 0:
		return c, fmt.Errorf("-threads is %d; want >= 0", c.session.Threads)
	case c.session.MaxContext < 0:
		return c, fmt.Errorf("-ctx is %d; want >= 0", c.session.MaxContext)
	}
	ps, err := parsePrecisions(*prec, false)
	if err != nil {
		return c, err
	}
	if len(ps) != 1 {
		return c, fmt.Errorf("-precision is %q; want one of f32 and bf16", *prec)
	}
	c.session.Precision = ps[0]
	if err := c.sampler.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// runGenerate is the generate subcommand: 0 on success, 1 when the model
// cannot be loaded or run or the run is interrupted, 2 for a bad command
// line.
func runGenerate(args []string, stdout, stderr io.Writer) int {
	c, err := parseGenerate(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "attnbench generate:", err)
		fmt.Fprintln(stderr, "run attnbench generate -h for the flags")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "attnbench generate:", err)
		return 1
	}
	f, err := gguf.Open(c.model)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	start := time.Now()
	m, err := model.Load(f)
	if err != nil {
		return fail(err)
	}
	load := time.Since(start)
	if m.Tokenizer == nil {
		return fail(fmt.Errorf("%s has no llama (SentencePiece) tokenizer", c.model))
	}
	s, err := m.NewSession(c.session)
	if err != nil {
		return fail(err)
	}

	// One token through the model first, so that the rates leave out the
	// first touch of the weights and the engine's first allocations.
	// Generate starts from an empty context again.
	if _, err := s.Forward([]int{max(m.Tokenizer.BOS(), 0)}); err != nil {
		return fail(err)
	}

	ctx, stop := generateContext()
	defer stop()
	fmt.Fprint(stdout, c.prompt)
	st, err := s.Generate(ctx, c.prompt, c.n, c.sampler, func(piece string) bool {
		_, werr := io.WriteString(stdout, piece)
		return werr == nil
	})
	fmt.Fprintln(stdout)
	// An interrupt still reports the rates of what ran; any other failure
	// reports only its error, since no rate or stop reason describes it.
	interrupted := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if err != nil && !interrupted {
		return fail(err)
	}
	stopReason := st.Stop.String()
	if interrupted {
		stopReason = "interrupted"
	}
	cfg := m.Config
	threads := c.session.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// The kernels that ran the products: the float32 ones (projections and
	// attention), and in bf16 precision those of attention's products.
	kernels := f32Kernel()
	if c.session.Precision == attention.PrecisionBFloat16 {
		kernels += ", attention's bf16 products " + bf16Kernel()
	}
	fmt.Fprintf(stderr, "model: %s, %d block%s, %d head%s / %d KV head%s × %d, %d token%s, RoPE %v; loaded in %v; %d thread%s, kernels %s\n",
		cfg.Architecture, cfg.BlockCount, plural(cfg.BlockCount), cfg.HeadCount, plural(cfg.HeadCount), cfg.HeadCountKV, plural(cfg.HeadCountKV),
		cfg.HeadDim, cfg.VocabSize, plural(cfg.VocabSize), m.RoPE, load.Round(time.Millisecond), threads, plural(threads), kernels)
	fmt.Fprintf(stderr, "prefill: %d token%s in %v, %.0f tokens/s\n", st.PromptTokens, plural(st.PromptTokens), st.Prefill.Round(time.Microsecond), st.PrefillTokensPerSecond())
	fmt.Fprintf(stderr, "decode:  %d token%s in %v, %.0f tokens/s (%d generated, stop: %v)\n",
		st.DecodeSteps, plural(st.DecodeSteps), st.Decode.Round(time.Microsecond), st.DecodeTokensPerSecond(), len(st.Tokens), stopReason)
	if interrupted {
		return fail(errors.New("interrupted"))
	}
	return 0
}
