package config

import (
	"strings"
	"testing"
)

// urlErrors returns the errors every use of a URL setting gives for raw: REDIS_URL read by
// Load's validation and opened (plain and cluster), DATABASE_URL opened.
func urlErrors(raw string) map[string]error {
	errs := map[string]error{}
	for _, cluster := range []bool{false, true} {
		r := Redis{URL: raw, Cluster: cluster, KeyPrefix: "junban"}
		name := "REDIS_URL"
		if cluster {
			name += " (cluster)"
		}
		if _, err := r.Client(); err != nil {
			errs[name+" Client"] = err
		}
		if err := r.Validate(); err != nil {
			errs[name+" Validate"] = err
		}
	}
	db, err := (Postgres{URL: raw}).Open()
	if err != nil {
		errs["DATABASE_URL Open"] = err
	} else if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close() // nothing was dialled (Open does not ping); its pool goes
	}
	return errs
}

// A malformed URL's error names its variable and shows no part of its password, however
// the URL is broken: the parsers quote the raw string in their errors.
//
// Failed against the code before the change: REDIS_URL's errors quoted the URL with its
// password (`config: REDIS_URL: parse "redis://:hunter2hunter2@127.0.0.1:xx/0": invalid
// port`), and a password with a '/' showed its first part in the port the parser found.
func TestMalformedURLErrorsHideThePassword(t *testing.T) {
	cases := []struct {
		raw    string
		pieces []string // the parts of the password that must not show
	}{
		{"redis://:hunter2hunter2@127.0.0.1:xx/0", []string{"hunter2hunter2"}},
		{"redis://admin:hunter2hunter2@127.0.0.1:6379/notadb", []string{"hunter2hunter2"}},
		{"redis://:hunter2/secretpart@127.0.0.1:6379/0", []string{"hunter2", "secretpart"}},
		{"redis://:hunter2#secretpart@127.0.0.1:6379/0", []string{"hunter2", "secretpart"}},
		{"redis://:hunter2?secretpart@127.0.0.1:6379/0", []string{"hunter2", "secretpart"}},
		{"redis://:hunter2 secretpart@127.0.0.1:6379/0", []string{"hunter2", "secretpart"}},
		{"redis//:hunter2hunter2@127.0.0.1:6379/0", []string{"hunter2hunter2"}},
		{"redis:hunter2://secretpart@127.0.0.1:6379/0", []string{"hunter2", "secretpart"}},
		{"\x7fredis://:hunter2hunter2@127.0.0.1:6379/0", []string{"hunter2hunter2"}},
		{"ftp://:hunter2hunter2@127.0.0.1:6379/0", []string{"hunter2hunter2"}},
		{"postgres://app:hunter2hunter2@127.0.0.1:xx/junban", []string{"hunter2hunter2"}},
		{"postgres://app:hunter2/secretpart@127.0.0.1:5432/junban", []string{"hunter2", "secretpart"}},
		{"host=127.0.0.1 port=xx password=hunter2hunter2 dbname=junban", []string{"hunter2hunter2"}},
		{"host=127.0.0.1 port=xx password='hunter2 secretpart' dbname=junban", []string{"hunter2", "secretpart"}},
	}
	for _, c := range cases {
		errs := urlErrors(c.raw)
		if len(errs) == 0 {
			t.Errorf("%q: no error anywhere", c.raw)
		}
		for where, err := range errs {
			msg := err.Error()
			variable, _, _ := strings.Cut(where, " ")
			if !strings.Contains(msg, variable) {
				t.Errorf("%q: %s: %q does not name %s", c.raw, where, msg, variable)
			}
			for _, p := range c.pieces {
				if strings.Contains(msg, p) {
					t.Errorf("%q: %s: %q shows %q of the password", c.raw, where, msg, p)
				}
			}
		}
	}
}

// FuzzURLErrorsHideThePassword: whatever surrounds it, a password written into a URL
// setting's userinfo never appears in an error of any use of the setting, and each error
// names its variable. A password that the error for the same URL without it shows as well
// (a coincidence: "redis", "port") proves nothing and is skipped.
func FuzzURLErrorsHideThePassword(f *testing.F) {
	for _, s := range [][4]string{
		{"redis://", "", "hunter2hunter2", "127.0.0.1:xx/0"},
		{"redis://", "admin", "hunter2/secret", "127.0.0.1:6379/0"},
		{"rediss://", "", "p#ss?w/rd", "[::1]:6379/notadb"},
		{"postgres://", "app", "hunter2hunter2", "127.0.0.1:5432/junban?sslmode=bogus"},
		{"", "", "hunter2hunter2", "127.0.0.1:6379"},
		{"\x7f", "u", "hunter2hunter2", "h"},
		{"redis:", "", "abc://def", "host:1"},
		{"host=h port=xx password=", "", "hunter2hunter2", " dbname=j"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, prefix, user, password, rest string) {
		if password == "" {
			return
		}
		raw := prefix + user + ":" + password + "@" + rest
		without := urlErrors(prefix + user + ":@" + rest)
		for where, err := range urlErrors(raw) {
			msg := err.Error()
			variable, _, _ := strings.Cut(where, " ")
			if !strings.Contains(msg, variable) {
				t.Fatalf("%q: %s: %q does not name %s", raw, where, msg, variable)
			}
			if strings.Contains(msg, password) {
				if other, ok := without[where]; ok && strings.Contains(other.Error(), password) {
					continue
				}
				t.Fatalf("%q: %s: %q shows the password %q", raw, where, msg, password)
			}
		}
	})
}
