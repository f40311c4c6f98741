// Package codehost is the gateway's client of the code host's REST API
// (CONTRACT §9): read a pull request's head commit, create and update the
// Security Gate check run, post an issue comment. It wraps
// github.com/google/go-github, the maintained client of that API, with the
// gateway's outbound HTTP client (its address guard) and a timeout on
// every call. It is its own package because it is neither actor, rule,
// storage nor the gateway's API: an outbound client.
package codehost

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"

	"svc/rules/gate"
)

// Timeout bounds every call.
const Timeout = 10 * time.Second

// Client calls the code host with the app token.
type Client struct {
	gh      *github.Client
	timeout time.Duration
}

// New returns a client of the REST API at apiURL (SVC_CODEHOST_API_URL)
// with token (SVC_CODEHOST_APP_TOKEN), through hc.
func New(apiURL, token string, hc *http.Client, timeout time.Duration) (*Client, error) {
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/"
	}
	gh, err := github.NewClient(github.WithHTTPClient(hc), github.WithAuthToken(token), github.WithURLs(&apiURL, nil),
		github.WithUserAgent("svc-security-gate"), github.WithDisableRateLimitCheck())
	if err != nil {
		return nil, fmt.Errorf("codehost: %w", err)
	}
	if timeout <= 0 {
		timeout = Timeout
	}
	return &Client{gh: gh, timeout: timeout}, nil
}

// HeadSHA reads the pull request's head commit.
func (c *Client) HeadSHA(ctx context.Context, pr gate.PR) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	p, _, err := c.gh.PullRequests.Get(ctx, pr.Owner, pr.Repo, pr.Number)
	if err != nil {
		return "", fmt.Errorf("codehost: read %s: %w", pr, err)
	}
	sha := p.GetHead().GetSHA()
	if sha == "" {
		return "", fmt.Errorf("codehost: %s has no head commit", pr)
	}
	return sha, nil
}

func options(o gate.Output) (status, conclusion string, out *github.CheckRunOutput) {
	anns := make([]*github.CheckRunAnnotation, 0, len(o.Annotations))
	for _, a := range o.Annotations {
		anns = append(anns, &github.CheckRunAnnotation{Path: github.Ptr(gate.AnnotationPath), StartLine: github.Ptr(1), EndLine: github.Ptr(1),
			AnnotationLevel: github.Ptr(a.Level), Title: github.Ptr(a.Title), Message: github.Ptr(a.Message)})
	}
	return "completed", o.Tally.Conclusion(), &github.CheckRunOutput{Title: github.Ptr(o.Tally.Title()),
		Summary: github.Ptr(o.Tally.Summary()), Annotations: anns}
}

// CreateCheckRun creates the Security Gate check run on the commit.
func (c *Client) CreateCheckRun(ctx context.Context, pr gate.PR, sha string, o gate.Output) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	status, conclusion, out := options(o)
	now := github.Timestamp{Time: time.Now()}
	run, _, err := c.gh.Checks.CreateCheckRun(ctx, pr.Owner, pr.Repo, github.CreateCheckRunOptions{Name: gate.Name, HeadSHA: sha,
		Status: &status, Conclusion: &conclusion, CompletedAt: &now, Output: out})
	if err != nil {
		return 0, fmt.Errorf("codehost: create the check run on %s: %w", pr, err)
	}
	if run.GetID() == 0 {
		return 0, errors.New("codehost: the created check run has no id")
	}
	return run.GetID(), nil
}

// UpdateCheckRun updates the check run.
func (c *Client) UpdateCheckRun(ctx context.Context, pr gate.PR, id int64, o gate.Output) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	status, conclusion, out := options(o)
	now := github.Timestamp{Time: time.Now()}
	_, _, err := c.gh.Checks.UpdateCheckRun(ctx, pr.Owner, pr.Repo, id, github.UpdateCheckRunOptions{Name: gate.Name,
		Status: &status, Conclusion: &conclusion, CompletedAt: &now, Output: out})
	if err != nil {
		return fmt.Errorf("codehost: update the check run of %s: %w", pr, err)
	}
	return nil
}

// Comment posts a comment on the pull request.
func (c *Client) Comment(ctx context.Context, pr gate.PR, body string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, _, err := c.gh.Issues.CreateComment(ctx, pr.Owner, pr.Repo, pr.Number, &github.IssueComment{Body: &body}); err != nil {
		return fmt.Errorf("codehost: comment on %s: %w", pr, err)
	}
	return nil
}
