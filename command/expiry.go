package command

import "time"

// expiry is when a row stops being served and what the sweep then does with it.
type expiry struct {
	at       *time.Time
	onExpire string
}

// expiryInput is what decides a row's expiry.
type expiryInput struct {
	now                time.Time
	ttlSeconds         *int
	validTo            *time.Time
	typeConfig         TypeConfig
	namespace          NamespaceConfig
	high               bool
	sensitiveRetention time.Duration
}

// resolveExpiry takes the earliest of the writer's ttl, the fact's valid_to, the
// type's retention (else the namespace's) and, for a high row, the sensitive
// retention. The action is the type's, else the namespace's, else a tombstone.
func resolveExpiry(in expiryInput) expiry {
	var at *time.Time
	earliest := func(t time.Time) {
		if at == nil || t.Before(*at) {
			t := t.UTC()
			at = &t
		}
	}
	if in.ttlSeconds != nil {
		earliest(in.now.Add(time.Duration(*in.ttlSeconds) * time.Second))
	}
	if in.validTo != nil {
		earliest(*in.validTo)
	}
	switch {
	case in.typeConfig.RetentionDays > 0:
		earliest(in.now.AddDate(0, 0, in.typeConfig.RetentionDays))
	case in.namespace.RetentionDays > 0:
		earliest(in.now.AddDate(0, 0, in.namespace.RetentionDays))
	}
	if in.high && in.sensitiveRetention > 0 {
		earliest(in.now.Add(in.sensitiveRetention))
	}
	if at == nil {
		return expiry{}
	}
	action := ExpireTombstone
	switch {
	case in.typeConfig.OnExpire != "":
		action = in.typeConfig.OnExpire
	case in.namespace.OnExpire != "":
		action = in.namespace.OnExpire
	}
	return expiry{at: at, onExpire: action}
}
