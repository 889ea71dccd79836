package agentq

import (
	"os"

	"github.com/agentq/agentq/internal/config"
)

// Config is a loaded, validated configuration: Redis, providers and their
// keys, routes, retries, limits, the worker's queues and concurrency. The
// zero Config is not usable; use LoadConfig or ParseConfig.
type Config struct{ c *config.Config }

// LoadConfig reads a configuration file (YAML), expands ${VAR} and
// ${file:PATH}, applies AGENTQ_* environment variables over it, and
// validates it. An empty path reads no file: defaults and the environment
// only. Every problem is reported, each naming its field and line.
func LoadConfig(path string) (Config, error) {
	c, err := config.Load(config.Input{Path: path, LookupEnv: os.LookupEnv})
	if err != nil {
		return Config{}, err
	}
	return Config{c: &c}, nil
}

// ParseConfig is LoadConfig for a configuration already in memory; name
// says where it came from in errors.
func ParseConfig(name string, data []byte) (Config, error) {
	c, err := config.Load(config.Input{Path: name, Data: data, LookupEnv: os.LookupEnv})
	if err != nil {
		return Config{}, err
	}
	return Config{c: &c}, nil
}

// ParseConfigWith is ParseConfig with lookup in place of the process's
// environment (for ${VAR} and AGENTQ_* settings).
func ParseConfigWith(name string, data []byte, lookup func(string) (string, bool)) (Config, error) {
	c, err := config.Load(config.Input{Path: name, Data: data, LookupEnv: lookup})
	if err != nil {
		return Config{}, err
	}
	return Config{c: &c}, nil
}

// Routes names the configured routes, sorted.
func (c Config) Routes() []string {
	if c.c == nil {
		return nil
	}
	return c.c.RouteNames()
}
