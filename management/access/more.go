package access

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/posture"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
)

// --- posture checks ---

// PutPostureCheck creates (c.ID empty) or replaces a posture check.
func (s *Service) PutPostureCheck(ctx context.Context, acc account.ID, c account.PostureCheck, initiator string) (account.PostureCheck, error) {
	var err error
	if c.Name, err = cleanName(c.Name); err != nil {
		return c, err
	}
	if err := posture.Validate(c.Checks); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	activity := "posture.check.update"
	if c.ID == "" {
		c.ID, activity = account.PostureCheckID(uuid.NewString()), "posture.check.create"
	}
	c.AccountID = acc
	err = s.change(ctx, acc, activity, string(c.ID), initiator, map[string]string{"name": c.Name}, func(at *store.AccountTx) error {
		if activity == "posture.check.update" {
			if _, err := at.PostureCheck(ctx, c.ID); err != nil {
				return err
			}
		}
		if err := at.PutPostureCheck(ctx, c); errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: a posture check named %q", ErrConflict, c.Name)
		} else if err != nil {
			return err
		}
		return nil
	})
	return c, err
}

// DeletePostureCheck removes a posture check no policy names.
func (s *Service) DeletePostureCheck(ctx context.Context, acc account.ID, id account.PostureCheckID, initiator string) error {
	return s.change(ctx, acc, "posture.check.delete", string(id), initiator, nil, func(at *store.AccountTx) error {
		if _, err := at.PostureCheck(ctx, id); err != nil {
			return err
		}
		ps, err := at.Policies(ctx)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if slices.Contains(p.PostureChecks, string(id)) {
				return fmt.Errorf("%w: posture check has been linked to policy: %s", ErrInUse, p.Name)
			}
		}
		return at.DeletePostureCheck(ctx, id)
	})
}

// --- setup keys ---

// CreateSetupKey makes a key and returns it with its secret (shown once).
func (s *Service) CreateSetupKey(ctx context.Context, acc account.ID, o setupkey.Options, initiator string) (account.SetupKey, string, error) {
	if o.Name, _ = cleanName(o.Name); o.Name == "" {
		return account.SetupKey{}, "", fmt.Errorf("%w: a setup key needs a name", ErrInvalid)
	}
	k, secret, err := setupkey.New(acc, o, s.now())
	if err != nil {
		return account.SetupKey{}, "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	err = s.st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		if err := checkGroupIDs(ctx, at, k.AutoGroups); err != nil {
			return err
		}
		if err := at.InsertSetupKey(ctx, k); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: s.now().UTC(), Activity: "setupkey.add", Initiator: initiator, Target: string(k.ID),
			Meta: map[string]string{"name": k.Name}})
		return err
	})
	if err != nil {
		return account.SetupKey{}, "", mapErr(err)
	}
	return k, secret, nil
}

// UpdateSetupKey revokes a key or replaces its auto-groups.
func (s *Service) UpdateSetupKey(ctx context.Context, acc account.ID, id account.SetupKeyID, revoked bool, groups []string, initiator string) (account.SetupKey, error) {
	if groups == nil {
		return account.SetupKey{}, fmt.Errorf("%w: auto_groups is required (use [] for none)", ErrInvalid)
	}
	var k account.SetupKey
	err := s.st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		var err error
		if k, err = at.SetupKey(ctx, id); err != nil {
			return err
		}
		if err := checkGroupIDs(ctx, at, groups); err != nil {
			return err
		}
		if err := at.UpdateSetupKeyGroups(ctx, id, groups); err != nil {
			return err
		}
		k.AutoGroups = groups
		activity := "setupkey.update"
		if revoked && !k.Revoked {
			if err := at.RevokeSetupKey(ctx, id); err != nil {
				return err
			}
			k.Revoked, activity = true, "setupkey.revoke"
		}
		_, err = at.InsertEvent(ctx, account.Event{At: s.now().UTC(), Activity: activity, Initiator: initiator, Target: string(id)})
		return err
	})
	return k, mapErr(err)
}

// DeleteSetupKey removes a key; peers registered with it stay.
func (s *Service) DeleteSetupKey(ctx context.Context, acc account.ID, id account.SetupKeyID, initiator string) error {
	return mapErr(s.st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		if err := at.DeleteSetupKey(ctx, id); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: s.now().UTC(), Activity: "setupkey.delete", Initiator: initiator, Target: string(id)})
		return err
	}))
}

func checkGroupIDs(ctx context.Context, at *store.AccountTx, ids []string) error {
	missing, err := at.MissingGroup(ctx, ids)
	if err == nil && missing != "" {
		err = fmt.Errorf("%w: group %q does not exist", ErrInvalid, missing)
	}
	return err
}
