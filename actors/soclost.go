package actors

// Audit holes (SPEC 4.2 rule 10): decisions answered but never recorded
// raise a rate-limited HIGH alert for their tenant.

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"svc/messages"
	"svc/persistence"
	"svc/rules/detect"
)

// alertRecordLost is the rule key and name of the HIGH alert raised when
// decisions answered before their commit could not be recorded.
const alertRecordLost = "audit_record_lost"

// lostAlertEvery bounds the audit-hole alerts to one per tenant in this
// time; the losses in between are counted into the next one.
const lostAlertEvery = time.Minute

// lostRecords is a tenant's audit losses not yet alerted, and when it was
// last alerted.
type lostRecords struct {
	count     int
	last      *messages.RecordLost
	alertedAt time.Time
}

// recordLost notes a decision that was answered but never recorded; the
// tenant hears of it at once unless it was alerted within lostAlertEvery.
func (p *socPipeline) recordLost(m *messages.RecordLost) {
	l := p.lost[m.TenantID]
	if l == nil {
		l = &lostRecords{}
		p.lost[m.TenantID] = l
	}
	l.count++
	l.last = m
	p.alertLost(time.Now(), true)
}

// alertLost raises the audit-hole alert of every tenant with losses whose
// last alert is older than lostAlertEvery; fresh (a loss just arrived)
// keeps the tenants without losses, else they are forgotten once quiet.
func (p *socPipeline) alertLost(now time.Time, fresh bool) {
	for tenant, l := range p.lost {
		if l.count == 0 {
			if !fresh && now.Sub(l.alertedAt) >= lostAlertEvery {
				delete(p.lost, tenant)
			}
			continue
		}
		if !l.alertedAt.IsZero() && now.Sub(l.alertedAt) < lostAlertEvery {
			continue
		}
		m := l.last
		summary := fmt.Sprintf("%s: %d decision(s) answered before their commit were not recorded; the audit trail and receipt chain lack them (last: decision %s of agent %s: %s)",
			alertRecordLost, l.count, m.DecisionID, m.AgentID, m.Error)
		a := persistence.Alert{ID: persistence.NewRecordID(), TenantID: tenant, RuleKey: alertRecordLost, AlertName: alertRecordLost,
			Severity: detect.SeverityHigh, Source: detect.SourceDefault, AgentID: m.AgentID, DecisionID: m.DecisionID,
			SourceEventID: uuid.NewString(), Summary: summary, CreatedAt: now.UTC()}
		p.alerts = append(p.alerts, a)
		p.stats.Alerts.Add(1)
		if p.opt.Feed != nil {
			p.opt.Feed.Publish(messages.FeedItem{TenantID: tenant, Type: messages.FeedAlert, Data: a.Record()})
		}
		if p.opt.Notify != nil {
			p.opt.Notify(messages.Notification{Kind: alertRecordLost, Severity: messages.NotifySeverityHigh, TenantID: tenant,
				AgentID: m.AgentID, At: a.CreatedAt, Summary: summary, Detail: fmt.Sprintf("alert %s", a.ID),
				RecordType: messages.FeedAlert, RecordID: a.ID, RuleKey: alertRecordLost})
		}
		l.count, l.alertedAt = 0, now
	}
}

// alertLogRefused is the rule key and name of the HIGH alert raised when a
// witness refuses a checkpoint of the tenant's receipt log.
const alertLogRefused = "receipt_log_refused"

// logRefused raises the HIGH alert of a witness's refusal (the job reports
// a witness's refusal once, when it starts refusing).
func (p *socPipeline) logRefused(m *messages.LogRefused) {
	summary := fmt.Sprintf("%s: witness %s (%s) refused the receipt log's checkpoint of %d receipts: %s", alertLogRefused, m.Witness,
		m.URL, m.Size, m.Reason)
	a := persistence.Alert{ID: persistence.NewRecordID(), TenantID: m.TenantID, RuleKey: alertLogRefused, AlertName: alertLogRefused,
		Severity: detect.SeverityHigh, Source: detect.SourceDefault, SourceEventID: uuid.NewString(), Summary: summary, CreatedAt: m.At.UTC()}
	p.alerts = append(p.alerts, a)
	p.stats.Alerts.Add(1)
	if p.opt.Feed != nil {
		p.opt.Feed.Publish(messages.FeedItem{TenantID: m.TenantID, Type: messages.FeedAlert, Data: a.Record()})
	}
	if p.opt.Notify != nil {
		p.opt.Notify(messages.Notification{Kind: alertLogRefused, Severity: messages.NotifySeverityHigh, TenantID: m.TenantID,
			At: a.CreatedAt, Summary: summary, Detail: fmt.Sprintf("alert %s", a.ID), RecordType: messages.FeedAlert, RecordID: a.ID,
			RuleKey: alertLogRefused})
	}
}
