package web

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// The topology pages show endpoints, routes, policies and subscriptions,
// and let admin keys change them when the store holds them (docs/design.md §15).
// An object is edited as YAML, in the configuration file's form, and saved
// through the API on the condition that it is still at the version the
// page showed: a change someone made meanwhile is never overwritten.

// topologyMode is where the topology lives, and whether this session may
// change it there.
type topologyMode struct {
	// File is the configuration file that holds the topology; empty when
	// the store holds it.
	File string
	// Missing says why no topology can be shown (a server that keeps no
	// topology objects); empty normally.
	Missing string
	// Admin reports whether the session's key may change the topology.
	Admin bool
}

// Editable reports whether the pages offer to change the topology.
func (m topologyMode) Editable() bool { return m.File == "" && m.Missing == "" && m.Admin }

// Shown reports whether the topology can be shown at all.
func (m topologyMode) Shown() bool { return m.Missing == "" }

// topology reads the topology and where it lives. A server that keeps no
// topology objects is not an error: there is nothing to show or change.
func (h *Handler) topology(ctx context.Context, c *api.Client, s *session) (*api.Topology, topologyMode, error) {
	m := topologyMode{Admin: s.role == courier.RoleAdmin}
	t, err := c.Topology(ctx)
	if courier.ErrorCode(err) == courier.CodeNotConfigured {
		m.Missing = courier.ErrorMessage(err)
		return &api.Topology{}, m, nil
	}
	if err != nil {
		return nil, m, err
	}
	m.File = t.File
	return t, m, nil
}

// kindOf returns the kind of object a path's section names ("routes").
func kindOf(section string) (courier.TopologyKind, bool) {
	for _, k := range courier.TopologyKinds {
		if k.Section() == section {
			return k, true
		}
	}
	return "", false
}

// kindTitle is a kind's section as a heading.
func kindTitle(k courier.TopologyKind) string {
	s := k.Section()
	return strings.ToUpper(s[:1]) + s[1:]
}

// objectHints say, per kind, what the fields are.
var objectHints = map[courier.TopologyKind]string{
	courier.KindEndpoint:     "The fields of an endpoint as under endpoints: in the configuration file: transport and its target (url, addr, dir...), timeout, limits, health rules.",
	courier.KindRoute:        "The fields of a route as under routes: in the configuration file: its endpoints and strategy, or a workflow or a lookup.",
	courier.KindPolicy:       "The fields of a policy as under policies: in the configuration file, named after the message type it is for (default: every type without its own).",
	courier.KindSubscription: "The fields of a subscription as under subscriptions: in the configuration file: the types it wants, its route, and an optional header filter.",
}

// starters are the text of a new object's form: the fields every object of
// the kind has, to be filled in.
var starters = map[courier.TopologyKind]string{
	courier.KindEndpoint:     "transport: http\nurl: \n",
	courier.KindRoute:        "endpoints: []\n",
	courier.KindPolicy:       "max_age: 48h\nmax_attempts: 12\n",
	courier.KindSubscription: "types: []\nroute: \n",
}

// objectRow is one object in a list.
type objectRow struct {
	Name    string
	Summary string
}

// kindList is the objects of one kind.
type kindList struct {
	Kind    courier.TopologyKind
	Section string
	Title   string
	Objects []objectRow
}

type topologyData struct {
	Mode    topologyMode
	Version int64
	Kinds   []kindList
}

// topologyPage lists every object of the topology, kind by kind.
func (h *Handler) topologyPage(w http.ResponseWriter, r *http.Request, s *session) {
	t, mode, err := h.topology(r.Context(), h.client(s), s)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d := topologyData{Mode: mode, Version: t.Version}
	for _, k := range courier.TopologyKinds {
		l := kindList{Kind: k, Section: k.Section(), Title: kindTitle(k)}
		objs := *t.Section(k)
		for _, name := range slices.Sorted(maps.Keys(objs)) {
			l.Objects = append(l.Objects, objectRow{Name: name, Summary: specSummary(objs[name])})
		}
		d.Kinds = append(d.Kinds, l)
	}
	p := h.base(r, s, "Topology", "topology")
	p.Data = d
	h.render(w, http.StatusOK, "topology.html", p)
}

// objectData is the page of one object: shown, or its form.
type objectData struct {
	Mode    topologyMode
	Kind    courier.TopologyKind
	Section string
	Name    string
	// New is the form of an object to create.
	New bool
	// Spec is the object's fields as YAML: as stored, or as the operator
	// typed them when the save was refused.
	Spec      string
	Version   int64
	UpdatedAt *time.Time
	UpdatedBy string
	Hint      string
}

func (d objectData) Title() string {
	if d.New {
		return "New " + string(d.Kind)
	}
	return strings.ToUpper(string(d.Kind[:1])) + string(d.Kind[1:]) + " " + d.Name
}

// objectPage shows one object: as a form for an admin key when the store
// holds the topology, else read only.
func (h *Handler) objectPage(w http.ResponseWriter, r *http.Request, s *session) {
	kind, ok := kindOf(r.PathValue("kind"))
	if !ok {
		h.notFound(w, r, s)
		return
	}
	d, err := h.objectAsStored(r.Context(), h.client(s), s, kind, r.PathValue("name"))
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.renderObject(w, r, s, http.StatusOK, d, "")
}

// objectAsStored reads an object for its page.
func (h *Handler) objectAsStored(ctx context.Context, c *api.Client, s *session, kind courier.TopologyKind, name string) (objectData, error) {
	_, mode, err := h.topology(ctx, c, s)
	if err != nil {
		return objectData{}, err
	}
	if !mode.Shown() {
		return objectData{}, courier.Errorf(courier.CodeNotConfigured, "%s", mode.Missing)
	}
	o, err := c.Object(ctx, kind, name)
	if err != nil {
		return objectData{}, err
	}
	text, err := specYAML(o.Spec)
	if err != nil {
		return objectData{}, err
	}
	return objectData{Mode: mode, Kind: kind, Section: kind.Section(), Name: name, Spec: text, Version: o.Version,
		UpdatedAt: o.UpdatedAt, UpdatedBy: o.UpdatedBy, Hint: objectHints[kind]}, nil
}

func (h *Handler) renderObject(w http.ResponseWriter, r *http.Request, s *session, status int, d objectData, why string) {
	p := h.base(r, s, d.Title(), "topology")
	if d.Kind == courier.KindEndpoint {
		p.Nav = "endpoints"
	}
	p.Error = why
	p.Data = d
	h.render(w, status, "object.html", p)
}

// newObjectPage is the form of a new object.
func (h *Handler) newObjectPage(w http.ResponseWriter, r *http.Request, s *session) {
	kind, ok := kindOf(r.PathValue("kind"))
	if !ok {
		h.notFound(w, r, s)
		return
	}
	_, mode, err := h.topology(r.Context(), h.client(s), s)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	switch {
	case !mode.Shown():
		h.fail(w, r, s, courier.Errorf(courier.CodeNotConfigured, "%s", mode.Missing))
		return
	case mode.File != "":
		h.fail(w, r, s, courier.Errorf(courier.CodeConflict, "The topology is in the configuration file %s: add the %s there and reload.", mode.File, kind))
		return
	case !mode.Admin:
		h.fail(w, r, s, courier.Errorf(courier.CodePermissionDenied, "Changing the topology takes an admin key."))
		return
	}
	d := objectData{Mode: mode, Kind: kind, Section: kind.Section(), New: true, Spec: starters[kind], Hint: objectHints[kind]}
	h.renderObject(w, r, s, http.StatusOK, d, "")
}

// createObject creates an object from the new object's form. It is
// refused when one of the name exists already, rather than replacing it.
func (h *Handler) createObject(w http.ResponseWriter, r *http.Request, s *session) {
	kind, ok := kindOf(r.PathValue("kind"))
	if !ok {
		h.notFound(w, r, s)
		return
	}
	d := objectData{Kind: kind, Section: kind.Section(), New: true, Name: strings.TrimSpace(r.PostFormValue("name")),
		Spec: r.PostFormValue("spec"), Hint: objectHints[kind]}
	c := h.client(s)
	if d.Name == "" {
		h.refuseForm(w, r, s, c, d, courier.Errorf(courier.CodeInvalidArgument, "Name: give the %s a name.", kind))
		return
	}
	spec, err := specJSON(d.Spec)
	if err != nil {
		h.refuseForm(w, r, s, c, d, courier.Errorf(courier.CodeInvalidArgument, "%v", err))
		return
	}
	if _, _, err := c.PutObject(r.Context(), kind, d.Name, spec, 0); err != nil {
		h.refuseForm(w, r, s, c, d, err)
		return
	}
	http.Redirect(w, r, objectURL(kind, d.Name)+"?note=object_created", http.StatusSeeOther)
}

// saveObject replaces an object with the fields of its form, on the
// condition that it is still at the version the form was made from.
func (h *Handler) saveObject(w http.ResponseWriter, r *http.Request, s *session) {
	kind, ok := kindOf(r.PathValue("kind"))
	if !ok {
		h.notFound(w, r, s)
		return
	}
	d := objectData{Kind: kind, Section: kind.Section(), Name: r.PathValue("name"), Spec: r.PostFormValue("spec"), Hint: objectHints[kind]}
	c := h.client(s)
	version, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	if err != nil || version < 1 {
		h.refuseForm(w, r, s, c, d, courier.Errorf(courier.CodeInvalidArgument, "The form does not say which version of the %s it changes: reload the page.", kind))
		return
	}
	d.Version = version
	spec, err := specJSON(d.Spec)
	if err != nil {
		h.refuseForm(w, r, s, c, d, courier.Errorf(courier.CodeInvalidArgument, "%v", err))
		return
	}
	o, _, err := c.PutObject(r.Context(), kind, d.Name, spec, version)
	if err != nil {
		h.refuseForm(w, r, s, c, d, err)
		return
	}
	note := "object_saved"
	if o.Version == version {
		note = "object_unchanged"
	}
	http.Redirect(w, r, objectURL(kind, d.Name)+"?note="+note, http.StatusSeeOther)
}

// deleteObject deletes an object, on the condition that it is still at the
// version its page showed.
func (h *Handler) deleteObject(w http.ResponseWriter, r *http.Request, s *session) {
	kind, ok := kindOf(r.PathValue("kind"))
	if !ok {
		h.notFound(w, r, s)
		return
	}
	name := r.PathValue("name")
	c := h.client(s)
	version, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	if err != nil || version < 1 {
		err = courier.Errorf(courier.CodeInvalidArgument, "The form does not say which version of the %s it deletes: reload the page.", kind)
	} else {
		err = c.DeleteObject(r.Context(), kind, name, version)
	}
	if err != nil {
		d, rerr := h.objectAsStored(r.Context(), c, s, kind, name)
		if rerr != nil {
			// Gone meanwhile, or the key is no longer valid.
			h.fail(w, r, s, rerr)
			return
		}
		if courier.ErrorCode(err) == courier.CodeFailedPrecondition {
			err = courier.Errorf(courier.CodeFailedPrecondition, "The %s %s was changed meanwhile (now version %d%s), so it was not deleted. Look at the change below, and delete it again if you still want to.",
				kind, name, d.Version, byWhom(d.UpdatedBy, d.UpdatedAt))
		}
		h.formFailure(w, r, s, d, err)
		return
	}
	http.Redirect(w, r, "/ui/topology?note=object_deleted#"+kind.Section(), http.StatusSeeOther)
}

// refuseForm shows a form again with what the operator typed and why it
// was not saved: the API's message, which names the field, or for a
// change made meanwhile by someone else, who and how to go on.
func (h *Handler) refuseForm(w http.ResponseWriter, r *http.Request, s *session, c *api.Client, d objectData, err error) {
	_, mode, terr := h.topology(r.Context(), c, s)
	if terr != nil {
		h.fail(w, r, s, terr)
		return
	}
	d.Mode = mode
	switch courier.ErrorCode(err) {
	case courier.CodeFailedPrecondition:
		err = courier.Errorf(courier.CodeFailedPrecondition, "%s", h.changedMeanwhile(r.Context(), c, d))
	case courier.CodeInvalidArgument:
		err = courier.Errorf(courier.CodeInvalidArgument, "%s", placeErrors(courier.ErrorMessage(err), d.Kind, d.Name, d.Spec))
	}
	h.formFailure(w, r, s, d, err)
}

// formFailure renders an object's page with an error the operator can act
// on, with the API's status; other errors make an error page.
func (h *Handler) formFailure(w http.ResponseWriter, r *http.Request, s *session, d objectData, err error) {
	switch courier.ErrorCode(err) {
	case courier.CodeInvalidArgument, courier.CodeConflict, courier.CodeFailedPrecondition, courier.CodePermissionDenied, courier.CodeNotFound:
		h.renderObject(w, r, s, api.StatusOf(err), d, courier.ErrorMessage(err))
	default:
		h.fail(w, r, s, err)
	}
}

// changedMeanwhile says why a conditional save was refused.
func (h *Handler) changedMeanwhile(ctx context.Context, c *api.Client, d objectData) string {
	if d.New {
		return fmt.Sprintf("A %s named %s exists already (made meanwhile?): open it to change it, or choose another name. What you typed is below.", d.Kind, d.Name)
	}
	now, err := c.Object(ctx, d.Kind, d.Name)
	switch {
	case courier.ErrorCode(err) == courier.CodeNotFound:
		return fmt.Sprintf("The %s %s was deleted meanwhile, so your change was not saved. What you typed is below; create it again to keep it.", d.Kind, d.Name)
	case err != nil:
		return fmt.Sprintf("The %s %s was changed meanwhile, so your change was not saved: reload the page to see the change, then make yours again. What you typed is below.", d.Kind, d.Name)
	}
	return fmt.Sprintf("The %s %s was changed meanwhile (now version %d%s), so your change was not saved: reload the page to see the change, then make yours again. What you typed is below.",
		d.Kind, d.Name, now.Version, byWhom(now.UpdatedBy, now.UpdatedAt))
}

func byWhom(who string, at *time.Time) string {
	var b strings.Builder
	if who != "" {
		b.WriteString(" by " + who)
	}
	if at != nil {
		b.WriteString(" at " + when(*at))
	}
	return b.String()
}

// objectURL is the page of an object.
func objectURL(kind courier.TopologyKind, name string) string {
	return "/ui/topology/" + kind.Section() + "/" + url.PathEscape(name)
}
