package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"svc/actors"
)

// WebhookPoster is the transport of the outbound chat notifier
// (actors.Post): one POST to target per call, without following redirects
// (a 3xx answer counts as a failure), reading at most 64 KiB of the answer.
// Its errors never carry the URL, which for chat webhooks embeds a secret.
func WebhookPoster(target string, client *http.Client) actors.Post {
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return func(ctx context.Context, body []byte, header map[string]string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return 0, scrubURL(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, scrubURL(err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
}

// scrubURL drops the URL from a transport error.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
