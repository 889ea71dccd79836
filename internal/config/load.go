package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/problem"
)

// MaxFileBytes bounds the size of a configuration file.
const MaxFileBytes = 1 << 20

// Input is where a configuration comes from, weakest first: defaults, the
// file, AGENTQ_* variables, flags.
type Input struct {
	// Path of the YAML file. Empty means no file.
	Path string
	// Data, when set, is the file's content (Path only names it).
	Data []byte
	// Optional: a missing file at Path is not an error (the default
	// agentq.yaml may be absent); a file named explicitly must exist.
	Optional bool
	// LookupEnv reads the environment (for ${VAR} and AGENTQ_*); nil means
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Flags holds the values of flags the user set, by setting key (see
	// Settings), e.g. "worker.concurrency": "20".
	Flags map[string]string
	// WithoutProviderKeys loads for a command that holds no provider
	// secret (the dashboard, enqueue): providers[].keys are neither
	// expanded (an unset ${VAR} or a missing ${file:PATH} there is no
	// error) nor kept (every provider's Keys is nil) nor required. Every
	// other field is loaded as usual. The zero value loads the keys: the
	// worker's and the SDK's configuration.
	WithoutProviderKeys bool
}

// Load builds the configuration and validates it. Every problem found is
// returned, one *FieldError each, joined.
func Load(in Input) (Config, error) {
	if in.LookupEnv == nil {
		in.LookupEnv = os.LookupEnv
	}
	var c Config
	if in.Data != nil {
		var err error
		if c, err = parse(in.Path, in.Data, in); err != nil {
			return Config{}, err
		}
		c.File = in.Path
	} else if in.Path != "" {
		data, err := readFile(in.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && in.Optional:
		case err != nil:
			return Config{}, &FieldError{Source: in.Path, Msg: err.Error()}
		default:
			if c, err = parse(in.Path, data, in); err != nil {
				return Config{}, err
			}
			c.File = in.Path
		}
	}
	c.applyDefaults()
	var errs []error
	for _, s := range Settings() {
		if v, ok := in.LookupEnv(s.Env); ok && v != "" {
			if err := s.set(&c, v); err != nil {
				errs = append(errs, &FieldError{Source: s.Env, Field: s.Key, Msg: err.Error()})
			}
		}
	}
	for _, s := range Settings() {
		if v, ok := in.Flags[s.Key]; ok {
			if err := s.set(&c, v); err != nil {
				errs = append(errs, &FieldError{Source: "--" + s.Flag, Field: s.Key, Msg: err.Error()})
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	c.fillDefaults()
	c.fillMCPDefaults()
	err := c.validate()
	if in.WithoutProviderKeys {
		err = withoutKeyProblems(err)
	}
	if err != nil {
		return Config{}, withSource(err, c.File) // no file: the field names the setting
	}
	return c, nil
}

// Parse reads a configuration from YAML without applying defaults,
// variables or validation beyond the YAML itself; Load is what commands use.
func parse(source string, data []byte, in Input) (Config, error) {
	var errs []error
	// Pass 1: unknown fields, reported with their line in the file as written.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var probe Config
	if err := dec.Decode(&probe); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return Config{}, yamlError(source, err.Error())
		}
		// Type errors here may come from a ${VAR} not yet expanded; pass 2
		// reports the real ones.
		for _, msg := range te.Errors {
			if m := unknownField.FindStringSubmatch(msg); m != nil {
				errs = append(errs, &FieldError{Source: source, Line: atoi(m[1]), Msg: fmt.Sprintf("unknown field %q", m[2])})
			}
		}
	}
	// Pass 2: expand ${VAR} in every scalar, then decode.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, yamlError(source, err.Error())
	}
	if in.WithoutProviderKeys {
		dropProviderKeys(&root)
		dropMCPSecrets(&root)
	}
	errs = append(errs, expand(source, &root, in.LookupEnv)...)
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	var c Config
	if len(root.Content) == 0 {
		return c, nil
	}
	if err := root.Decode(&c); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				if !unknownField.MatchString(msg) {
					errs = append(errs, yamlError(source, msg))
				}
			}
			return Config{}, errors.Join(errs...)
		}
		return Config{}, yamlError(source, err.Error())
	}
	return c, nil
}

var (
	unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type`)
	lineMsg      = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	typeMismatch = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into (\\S+)$")
	envRef       = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)
	fileRef      = regexp.MustCompile(`\$\{file:([^}]+)\}`)
)

func yamlError(source, msg string) error {
	if m := lineMsg.FindStringSubmatch(msg); m != nil {
		text := m[2]
		if t := typeMismatch.FindStringSubmatch(text); t != nil {
			text = fmt.Sprintf("%q is not %s", t[1], goTypeName(t[2]))
		}
		return &FieldError{Source: source, Line: atoi(m[1]), Msg: text}
	}
	return &FieldError{Source: source, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// expand replaces ${VAR} and ${VAR:-default} in every scalar value. A
// variable that is unset (and has no default) is an error naming it.
func expand(source string, n *yaml.Node, lookup func(string) (string, bool)) []error {
	var errs []error
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${file:") {
		// a secret mounted as a file (Kubernetes, Docker secrets): its
		// content, without the trailing newline
		n.Value = fileRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			path := fileRef.FindStringSubmatch(ref)[1]
			b, err := readFile(path)
			if err != nil {
				errs = append(errs, &FieldError{Source: source, Line: n.Line, Msg: fmt.Sprintf("${file:%s}: %v", path, err)})
				return ""
			}
			return strings.TrimRight(string(b), "\r\n")
		})
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			if v, ok := lookup(m[1]); ok && v != "" {
				return v
			}
			if strings.Contains(ref, ":-") {
				return m[2]
			}
			errs = append(errs, &FieldError{Source: source, Line: n.Line, Msg: fmt.Sprintf("environment variable %s is not set", m[1])})
			return ""
		})
		if n.Style == 0 {
			n.Tag = "" // let YAML resolve the expanded plain scalar (numbers, booleans)
		}
	}
	for _, c := range n.Content {
		errs = append(errs, expand(source, c, lookup)...)
	}
	return errs
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("file is larger than %d bytes", MaxFileBytes)
	}
	return data, nil
}

// applyDefaults fills what the file left at its zero value.
func (c *Config) applyDefaults() {
	d := Default()
	if c.Redis.Addr == "" {
		c.Redis.Addr = d.Redis.Addr
	}
	if c.Redis.DialTimeout == 0 {
		c.Redis.DialTimeout = d.Redis.DialTimeout
	}
	if dur := c.Redis.Durability; dur != nil && dur.Timeout == 0 {
		dur.Timeout = Duration(time.Second)
	}
	if c.Retention == 0 {
		c.Retention = d.Retention
	}
	r, dr := &c.Resilience.Retry, d.Resilience.Retry
	if r.Base == 0 {
		r.Base = dr.Base
	}
	if r.Factor == 0 {
		r.Factor = dr.Factor
	}
	if r.MaxDelay == 0 {
		r.MaxDelay = dr.MaxDelay
	}
	if r.Jitter == nil {
		r.Jitter = dr.Jitter
	}
	if r.MaxRetries == nil {
		r.MaxRetries = dr.MaxRetries
	}
	k, dk := &c.Resilience.Keys, d.Resilience.Keys
	if k.DefaultCooldown == 0 {
		k.DefaultCooldown = dk.DefaultCooldown
	}
	if k.MaxCooldown == 0 {
		k.MaxCooldown = dk.MaxCooldown
	}
	b, db := &c.Resilience.Breaker, d.Resilience.Breaker
	if b.ConsecutiveFailures == 0 {
		b.ConsecutiveFailures = db.ConsecutiveFailures
	}
	if b.ErrorRate == 0 {
		b.ErrorRate = db.ErrorRate
	}
	if b.Window == 0 {
		b.Window = db.Window
	}
	if b.MinCalls == 0 {
		b.MinCalls = db.MinCalls
	}
	if b.Cooldown == 0 {
		b.Cooldown = db.Cooldown
	}
	if b.ProbeInterval == 0 {
		b.ProbeInterval = db.ProbeInterval
	}
	h, dh := &c.Resilience.Health, d.Resilience.Health
	if h.Window == 0 {
		h.Window = dh.Window
	}
	if h.Weights == (HealthWeights{}) {
		h.Weights = dh.Weights
	}
	w, dw := &c.Worker, d.Worker
	if w.Concurrency == 0 {
		w.Concurrency = dw.Concurrency
	}
	c.defaultQueues(dw.Queues)
	if w.ShutdownTimeout == 0 {
		w.ShutdownTimeout = dw.ShutdownTimeout
	}
	if w.PollInterval == 0 {
		w.PollInterval = dw.PollInterval
	}
	if w.KeyLease == 0 {
		w.KeyLease = dw.KeyLease
	}
	if w.RetryPollInterval == 0 {
		w.RetryPollInterval = dw.RetryPollInterval
	}
	l, dl := &c.Limits, d.Limits
	if l.MaxSteps == 0 {
		l.MaxSteps = dl.MaxSteps
	}
	if l.MaxMapItems == 0 {
		l.MaxMapItems = dl.MaxMapItems
	}
	if l.MaxSpecBytes == 0 {
		l.MaxSpecBytes = dl.MaxSpecBytes
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = dl.MaxOutputBytes
	}
	if l.MaxTurns == 0 {
		l.MaxTurns = dl.MaxTurns
	}
	if l.MaxWait == 0 {
		l.MaxWait = dl.MaxWait
	}
	if l.MaxOpenAge == 0 {
		l.MaxOpenAge = dl.MaxOpenAge
	}
	if l.MaxTreeWorkflows == 0 {
		l.MaxTreeWorkflows = dl.MaxTreeWorkflows
	}
	if l.MaxKeptSignals == 0 {
		l.MaxKeptSignals = dl.MaxKeptSignals
	}
	if l.MaxSignalBytes == 0 {
		l.MaxSignalBytes = min(dl.MaxSignalBytes, l.MaxOutputBytes)
	}
	if c.Dashboard.MaxStreams == 0 {
		c.Dashboard.MaxStreams = d.Dashboard.MaxStreams
	}
	if c.Dashboard.MaxStreamsPerClient == 0 {
		c.Dashboard.MaxStreamsPerClient = min(d.Dashboard.MaxStreamsPerClient, c.Dashboard.MaxStreams)
	}
	if c.Events.Limit == 0 {
		c.Events.Limit = d.Events.Limit
	}
	if c.Signals.Keep == 0 {
		c.Signals.Keep = d.Signals.Keep
	}
}

// withSource stamps the file name on validation errors.
func withSource(err error, source string) error {
	var out []error
	for _, e := range problem.Split(err) {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Source == "" {
			fe.Source = source
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map"):
		return "a mapping"
	default:
		return "a " + strings.TrimPrefix(t, "config.")
	}
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}
