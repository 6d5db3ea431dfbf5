package sqlstore

import "sync"

// Secrets keeps the store's secrets (Store.Secret) once read: each is made
// once and never changes, so only the first call for a name asks the
// database.
type Secrets struct {
	m sync.Map // name → []byte
}

// Get returns the named secret, from load the first time.
func (c *Secrets) Get(name string, load func() ([]byte, error)) ([]byte, error) {
	if v, ok := c.m.Load(name); ok {
		return v.([]byte), nil
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	c.m.Store(name, v)
	return v, nil
}
