// Command genconv writes tests/quality/conversations.json: multi-session
// conversations between two friends, every turn a memory stamped with its session's
// date, and the questions that measure search over them.
//
// The procedure is seeded and documented here, so the corpus is ours and repeatable:
//
//   - Eight dialogues, two speakers each, drawn without replacement from the name
//     tables below. Dialogues 1–4 are the tuning half, 5–8 the held-out half; no
//     weight, threshold or word list may be chosen by looking at the held-out half.
//   - Each dialogue has six sessions, the first on a day of 2023 drawn from the seed,
//     the next 5 to 12 days apart, each in the evening.
//   - Each speaker gets five of the life events below (a trip, lessons, a sibling who
//     moves, a pet, a book, a race, a new job, a friend's wedding, a dinner out, a diet),
//     each rendered through one of its hand-written phrasings and placed in one or two
//     sessions; the other speaker answers some of them, echoing their words, as people
//     do. Chit-chat turns from a hand-written pool fill each session to 12–16 turns; no
//     line is said twice in a dialogue.
//   - Each event asks its own questions: single_hop (one turn answers it, phrased in
//     other words where people would), temporal ("when did…", a day named in full the
//     turn states only relatively, "yesterday" against its session's date, or a
//     question asked at a later session's date with reference_time: "the place … mentioned
//     last week"), multi_hop (two turns of different sessions, joined by a name only
//     the first holds) and no_answer (an event the speaker never had, a person never
//     mentioned, a city never visited).
//
// A turn's memory value is "Speaker: text" under a key that carries none of its words
// (d3-s2-t07), with valid_at at the turn's time. Regenerate with `go generate
// ./tests/quality/` (or `go run ./tests/quality/genconv -seed 34 -out
// tests/quality/conversations.json`) and review the diff; never edit the output.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"
)

// Question kinds.
const (
	SingleHop = "single_hop"
	Temporal  = "temporal"
	MultiHop  = "multi_hop"
	NoAnswer  = "no_answer"
)

// Turn is one memory: a line of a session.
type Turn struct {
	Key     string    `json:"key"`
	Speaker string    `json:"speaker"`
	Value   string    `json:"value"`
	ValidAt time.Time `json:"valid_at"`
}

// Session is one sitting of a dialogue.
type Session struct {
	Date  string `json:"date"`
	Turns []Turn `json:"turns"`
}

// Dialogue is one conversation, held in its own namespace.
type Dialogue struct {
	ID       string    `json:"id"`
	Half     string    `json:"half"`
	Speakers []string  `json:"speakers"`
	Sessions []Session `json:"sessions"`
}

// Question is one search of one dialogue, with the turns that answer it.
type Question struct {
	ID            string   `json:"id"`
	Half          string   `json:"half"`
	Dialogue      string   `json:"dialogue"`
	Kind          string   `json:"kind"`
	Query         string   `json:"query"`
	ReferenceTime string   `json:"reference_time,omitempty"`
	Expected      []string `json:"expected"`
}

// Corpus is conversations.json.
type Corpus struct {
	Comment   string     `json:"comment"`
	Seed      uint64     `json:"seed"`
	Dialogues []Dialogue `json:"dialogues"`
	Questions []Question `json:"questions"`
}

var (
	speakerNames = []string{"Maria", "Jonas", "Aiko", "Tomas", "Leila", "Omar", "Greta", "Ravi", "Sofia", "Kwame", "Elena",
		"Mateo", "Hana", "Felix", "Nadia", "Dario"}
	relativeNames = []string{"Ana", "Pieter", "Yuki", "Lucia", "Samir", "Ingrid", "Arjun", "Bea", "Kofi", "Irina", "Carmen",
		"Emil", "Mina", "Otto", "Zara", "Luca", "Wren", "Tariq", "Signe", "Paulo"}
	cities = []string{"Lisbon", "Porto", "Kraków", "Valencia", "Edinburgh", "Kyoto", "Montreal", "Cape Town", "Tallinn", "Seville",
		"Hanoi", "Oslo", "Bologna", "Marrakesh", "Vienna", "Dublin", "Ljubljana", "Bergen", "Naples", "Tbilisi"}
	unknownPeople = []string{"Bartholomew", "Priyanka", "Siegfried", "Ottoline", "Ezekiel", "Marisol", "Fitzgerald", "Anneliese"}
)

type lessonKind struct{ thing, category, teacherTrait string }

var lessons = []lessonKind{
	{"cello", "instrument", "I have a good ear"}, {"piano", "instrument", "my left hand is lazy"},
	{"pottery", "craft", "my bowls are finally symmetrical"}, {"salsa", "dance", "I lead too early"},
	{"Japanese", "language", "my pronunciation is decent"}, {"climbing", "sport", "my footwork is sloppy"},
	{"watercolour", "art", "I use too much water"}, {"sourdough baking", "cooking", "my starter is too wet"},
}

type petKind struct{ animal, breed, item string }

var pets = []petKind{
	{"dog", "scruffy terrier", "running shoes"}, {"cat", "grey tabby", "phone charger"}, {"dog", "greyhound", "sofa cushion"},
	{"rabbit", "lop-eared", "laptop cable"}, {"cat", "black", "headphone cable"}, {"dog", "beagle", "garden hose"},
}

var (
	books      = []string{"The Remains of the Day", "Piranesi", "A Gentleman in Moscow", "Station Eleven", "The Overstory", "Circe", "Educated", "Klara and the Sun"}
	companies  = []string{"Northwind Logistics", "Brightside Health", "Copperleaf Studio", "Alder Analytics", "Bluefin Maritime", "Juniper Labs"}
	roles      = []string{"data analyst", "product designer", "site engineer", "research nurse", "sound technician", "copy editor"}
	projects   = []string{"billing migration", "patient intake", "harbour survey", "mobile redesign", "warehouse robotics", "archive digitisation"}
	bosses     = []string{"Henrietta", "Desmond", "Ottavia", "Gunnar", "Beatrix", "Lorcan"}
	workplaces = []string{"children's hospital", "city library", "botanical garden", "marine institute", "opera house", "planetarium"}
	activities = []string{"walked up to the old castle every morning", "took a cooking class", "rented bikes along the coast",
		"spent a whole day at the flea market", "went on a boat tour", "hiked to a waterfall"}
	foods       = []string{"pastries", "dumplings", "grilled sardines", "tapas", "noodles", "ice creams"}
	cuisines    = []string{"Georgian", "Ethiopian", "Peruvian", "Lebanese", "Korean", "Sicilian"}
	restaurants = []string{"Mama Tamar", "Blue Nile", "Pachamama", "Cedars", "Seoul Kitchen", "Trattoria Nonna"}
	dishes      = []string{"dumplings", "injera", "ceviche", "falafel", "bibimbap", "arancini"}
	landmarks   = []string{"old tram depot", "cathedral", "river bridge", "market hall", "train station", "harbour"}
	diets       = []struct{ stopped, diet string }{{"eating meat", "vegetarian"}, {"drinking coffee", "caffeine-free"},
		{"eating sugar", "sugar-free"}, {"drinking alcohol", "sober"}}
	months = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
		"November", "December"}
)

// chitChat are the filler lines; {o} is the other speaker's name.
var chitChat = []string{
	"Hey {o}! How has your week been?", "Pretty quiet, mostly work and sleep.", "Ha, I know that feeling.",
	"The weather has been awful, it rained every single day.", "Did you watch the match on Saturday?",
	"I'm thinking of repainting the kitchen green.", "We should get coffee soon, it's been ages.",
	"I've been so tired lately, work is intense.", "Talk soon, take care!", "My neighbour plays the trumpet at seven in the morning.",
	"I finally fixed the leaking tap in the bathroom.", "Honestly I just want a long weekend.", "That's hilarious.",
	"Oh no, that sounds stressful.", "I'm so happy for you!", "Let me know how it goes.", "Same here, nothing exciting.",
	"I tried a new podcast about space, it's addictive.", "The bus drivers are on strike again.",
	"I've been trying to go to bed earlier, with mixed results.", "My plants are all dying, I have no idea why.",
	"Anyway, enough about me, what's new with you?", "I made soup for the whole week on Sunday.",
	"The new café on our street is overpriced but cosy.", "I've been listening to a lot of old jazz records.",
	"Sorry I didn't reply earlier, my phone died.", "Good night, {o}!", "Yes! Let's plan something next month.",
	"I can't believe it's already getting dark so early.", "I signed up for a newsletter about birds by accident and now I love it.",
	"We rearranged the living room and it feels twice as big.", "My brother-in-law keeps sending me memes.",
	"I'm trying to read more and scroll less.", "The traffic this morning was unbelievable.", "Wow, really?",
	"That reminds me, I still owe you a coffee.", "I watched a documentary about octopuses, they're so clever.",
	"I've been cooking more at home to save money.", "I lost my umbrella for the third time this year.",
	"Hope you're doing well, {o}.", "I'm so behind on emails it's embarrassing.", "We had a power cut for two hours yesterday evening.",
}

// gen is the generator's state for one dialogue.
type gen struct {
	r        *rand.Rand
	d        *Dialogue
	dates    []time.Time
	lines    [][]line // planned lines per session
	qs       []pendingQ
	chat     []string
	usedCity map[string]bool
	keys     map[string]string // a planned line's ref → its turn's key
	said     map[string]bool   // speaker+chit-chat line
}

// line is a planned turn; ref, when set, names it for questions.
type line struct {
	speaker, text, ref string
}

type pendingQ struct {
	kind, query, refTime string
	refs                 []string
}

func main() {
	out := flag.String("out", "conversations.json", "where to write the corpus")
	seed := flag.Uint64("seed", 34, "the generator's seed")
	flag.Parse()
	c := build(*seed)
	if err := check(c); err != nil {
		fmt.Fprintln(os.Stderr, "genconv:", err)
		os.Exit(1)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		fmt.Fprintln(os.Stderr, "genconv:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genconv:", err)
		os.Exit(1)
	}
	turns := 0
	for _, d := range c.Dialogues {
		for _, s := range d.Sessions {
			turns += len(s.Turns)
		}
	}
	fmt.Printf("genconv: %d dialogues, %d turns, %d questions -> %s\n", len(c.Dialogues), turns, len(c.Questions), *out)
}

func build(seed uint64) Corpus {
	r := rand.New(rand.NewPCG(seed, 0x10_0111))
	c := Corpus{Comment: "Generated by tests/quality/genconv (seeded; see its doc comment). Regenerate, never edit by hand.", Seed: seed}
	names := perm(r, speakerNames)
	for i := 0; i < 8; i++ {
		half := "tuning"
		if i >= 4 {
			half = "held_out"
		}
		d := &Dialogue{ID: fmt.Sprintf("d%d", i+1), Half: half, Speakers: []string{names[2*i], names[2*i+1]}}
		g := &gen{r: r, d: d, chat: perm(r, chitChat), usedCity: map[string]bool{}, keys: map[string]string{}, said: map[string]bool{}}
		g.dialogue()
		c.Dialogues = append(c.Dialogues, *d)
		for j, q := range g.qs {
			var keys []string
			for _, ref := range q.refs {
				keys = append(keys, g.keyOf(ref))
			}
			if keys == nil {
				keys = []string{}
			}
			c.Questions = append(c.Questions, Question{ID: fmt.Sprintf("%s-q%02d", d.ID, j+1), Half: half, Dialogue: d.ID,
				Kind: q.kind, Query: q.query, ReferenceTime: q.refTime, Expected: keys})
		}
	}
	return c
}

func perm[T any](r *rand.Rand, in []T) []T {
	out := append([]T(nil), in...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func pick[T any](r *rand.Rand, in []T) T { return in[r.IntN(len(in))] }

// keyOf is the key of the turn a ref names (after the sessions are laid out).
func (g *gen) keyOf(ref string) string {
	k, ok := g.keys[ref]
	if !ok {
		panic("genconv: no turn for " + ref)
	}
	return k
}

const sessions = 6

func (g *gen) dialogue() {
	start := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, g.r.IntN(240))
	g.dates = []time.Time{start}
	for i := 1; i < sessions; i++ {
		g.dates = append(g.dates, g.dates[i-1].AddDate(0, 0, 5+g.r.IntN(8)))
	}
	g.lines = make([][]line, sessions)
	events := []func(a, b string){g.trip, g.lessons, g.sibling, g.pet, g.book, g.race, g.job, g.wedding, g.dinner, g.diet}
	// Each speaker has five events; the five the other has not had ask no-answer questions.
	order := perm(g.r, events)
	a, b := g.d.Speakers[0], g.d.Speakers[1]
	for i, ev := range order {
		if i%2 == 0 {
			ev(a, b)
		} else {
			ev(b, a)
		}
	}
	g.noAnswers()
	for s := 0; s < sessions; s++ {
		g.layout(s)
	}
}

// say plans a line in session s.
func (g *gen) say(s int, speaker, text, ref string) {
	g.lines[s] = append(g.lines[s], line{speaker, text, ref})
}

func (g *gen) ask(kind, query, refTime string, refs ...string) {
	g.qs = append(g.qs, pendingQ{kind, query, refTime, refs})
}

func (g *gen) city() string {
	for {
		c := pick(g.r, cities)
		if !g.usedCity[c] {
			g.usedCity[c] = true
			return c
		}
	}
}

// ref names a planned line uniquely within the generator run.
func (g *gen) ref(what, who string) string { return g.d.ID + "/" + what + "/" + who }

func dateText(t time.Time) string { return fmt.Sprintf("%d %s %d", t.Day(), t.Month(), t.Year()) }

// events: each plans its turns and asks its questions. a has the event, b answers.

func (g *gen) trip(a, b string) {
	s := 1 + g.r.IntN(sessions-1)
	c, act, food := g.city(), pick(g.r, activities), pick(g.r, foods)
	text := pick(g.r, []string{
		fmt.Sprintf("I just got back from %s yesterday! We %s and I ate far too many %s.", c, act, food),
		fmt.Sprintf("Home since yesterday after five days in %s. We %s, and the %s were incredible.", c, act, food),
	})
	ref := g.ref("trip", a)
	g.say(s, a, text, ref)
	g.say(s, b, fmt.Sprintf("That sounds amazing, I've always wanted to see %s.", c), "")
	g.ask(Temporal, pick(g.r, []string{fmt.Sprintf("When did %s get back from %s?", a, c), fmt.Sprintf("When did %s return from the trip to %s?", a, c)}), "", ref)
	g.ask(Temporal, fmt.Sprintf("Which city did %s come home from on %s?", a, dateText(g.dates[s].AddDate(0, 0, -1))), "", ref)
	g.ask(SingleHop, fmt.Sprintf("What did %s do in %s?", a, c), "", ref)
}

func (g *gen) lessons(a, b string) {
	s := g.r.IntN(sessions)
	l := pick(g.r, lessons)
	teacher := pick(g.r, relativeNames)
	day := pick(g.r, []string{"Tuesday", "Wednesday", "Thursday"})
	ref := g.ref("lessons", a)
	g.say(s, a, pick(g.r, []string{
		fmt.Sprintf("I've started %s lessons on %s evenings. My teacher %s says %s.", l.thing, day, teacher, l.teacherTrait),
		fmt.Sprintf("%s nights are %s class now, I signed up for ten weeks with a teacher called %s.", day, l.thing, teacher),
	}), ref)
	g.say(s, b, fmt.Sprintf("Oh fun, I tried %s once and was terrible at it.", l.thing), "")
	g.ask(SingleHop, fmt.Sprintf("What %s is %s learning?", l.category, a), "", ref)
	g.ask(SingleHop, fmt.Sprintf("Who teaches %s's %s class?", a, l.thing), "", ref)
}

func (g *gen) sibling(a, b string) {
	s1 := g.r.IntN(sessions - 2)
	s2 := s1 + 1 + g.r.IntN(sessions-1-s1)
	rel := pick(g.r, []string{"sister", "brother", "cousin"})
	name := pick(g.r, relativeNames)
	c, work := g.city(), pick(g.r, workplaces)
	r1, r2 := g.ref("sibling1", a), g.ref("sibling2", a)
	g.say(s1, a, fmt.Sprintf("My %s %s is staying with us for a couple of weeks while job hunting, it's chaos but fun.", rel, name), r1)
	g.say(s2, a, pick(g.r, []string{
		fmt.Sprintf("%s finally found a flat in %s and starts at the %s there on Monday.", name, c, work),
		fmt.Sprintf("Good news, %s got the job at the %s in %s, so the spare room is ours again.", name, work, c),
	}), r2)
	g.ask(MultiHop, fmt.Sprintf("Which city did %s's %s move to?", a, rel), "", r1, r2)
	g.ask(MultiHop, fmt.Sprintf("Where does %s's %s work now?", a, rel), "", r1, r2)
	g.ask(SingleHop, fmt.Sprintf("Where did %s find a job?", name), "", r2)
}

func (g *gen) pet(a, b string) {
	s1 := g.r.IntN(sessions - 1)
	s2 := s1 + 1 + g.r.IntN(sessions-1-s1)
	p := pick(g.r, pets)
	name := pick(g.r, []string{"Biscuit", "Pepper", "Mochi", "Pumpkin", "Noodle", "Clementine", "Waffles", "Pixel"})
	r1, r2 := g.ref("pet1", a), g.ref("pet2", a)
	g.say(s1, a, fmt.Sprintf("We adopted a %s %s from the shelter last weekend, we called it %s.", p.breed, p.animal, name), r1)
	g.say(s1, b, "Send pictures immediately!", "")
	g.say(s2, a, fmt.Sprintf("%s chewed through my %s this morning and I couldn't even be angry.", name, p.item), r2)
	g.ask(SingleHop, fmt.Sprintf("What is the name of %s's %s?", a, p.animal), "", r1)
	g.ask(Temporal, fmt.Sprintf("When did %s adopt %s?", a, name), "", r1)
	g.ask(MultiHop, fmt.Sprintf("What did %s's %s chew through?", a, p.animal), "", r1, r2)
}

func (g *gen) book(a, b string) {
	s := g.r.IntN(sessions)
	title := pick(g.r, books)
	ref := g.ref("book", a)
	g.say(s, a, pick(g.r, []string{
		fmt.Sprintf("I finished %s on the train home, the ending made me cry.", title),
		fmt.Sprintf("Just read the last page of %s. I need a few days before I start anything else.", title),
	}), ref)
	g.say(s, b, "I keep meaning to read that one, is it worth it?", "")
	g.ask(SingleHop, fmt.Sprintf("Which novel did %s just finish?", a), "", ref)
}

func (g *gen) race(a, b string) {
	s := g.r.IntN(sessions)
	c := g.city()
	when := pick(g.r, []string{"two weeks ago", "yesterday", "last weekend"})
	mins := 95 + g.r.IntN(50)
	ref := g.ref("race", a)
	g.say(s, a, fmt.Sprintf("I ran the %s half marathon %s and finished in %d hours %d minutes. My knees are still complaining.", c, when, mins/60, mins%60), ref)
	g.say(s, b, "Respect. I get tired walking to the shop.", "")
	g.ask(Temporal, fmt.Sprintf("When did %s run the half marathon?", a), "", ref)
	g.ask(SingleHop, fmt.Sprintf("How long did %s take to finish the race in %s?", a, c), "", ref)
}

func (g *gen) job(a, b string) {
	s1 := g.r.IntN(sessions - 1)
	s2 := s1 + 1 + g.r.IntN(sessions-1-s1)
	i := g.r.IntN(len(companies))
	co, role, proj, boss := companies[i], roles[i], pick(g.r, projects), pick(g.r, bosses)
	r1, r2 := g.ref("job1", a), g.ref("job2", a)
	g.say(s1, a, fmt.Sprintf("Big news: I got the job at %s! I start as a %s next month.", co, role), r1)
	g.say(s1, b, fmt.Sprintf("Congratulations!! %s is lucky to have you.", co), "")
	g.say(s2, a, fmt.Sprintf("My new manager %s already put me on the %s project, no easing in at all.", boss, proj), r2)
	g.ask(SingleHop, fmt.Sprintf("What position did %s get at %s?", a, co), "", r1)
	g.ask(MultiHop, fmt.Sprintf("Who is %s's manager at %s?", a, co), "", r1, r2)
	g.ask(SingleHop, fmt.Sprintf("Which project is %s working on for %s?", a, boss), "", r2)
}

func (g *gen) wedding(a, b string) {
	s1 := g.r.IntN(sessions - 1)
	s2 := s1 + 1 + g.r.IntN(sessions-1-s1)
	friend := pick(g.r, relativeNames)
	c := g.city()
	m := months[g.dates[s2].Month()-1]
	r1, r2 := g.ref("wedding1", a), g.ref("wedding2", a)
	g.say(s1, a, fmt.Sprintf("My college friend %s is getting married in %s and asked me to give a speech. Terrifying.", friend, m), r1)
	g.say(s2, a, fmt.Sprintf("%s's wedding was lovely, the ceremony was on a boat in %s and nobody fell in.", friend, c), r2)
	g.say(s2, b, "A boat! That's so romantic.", "")
	g.ask(MultiHop, fmt.Sprintf("Where was the wedding of %s's college friend?", a), "", r1, r2)
	g.ask(Temporal, fmt.Sprintf("When was %s getting married?", friend), "", r1)
}

func (g *gen) dinner(a, b string) {
	s := g.r.IntN(sessions - 1)
	i := g.r.IntN(len(cuisines))
	ref := g.ref("dinner", a)
	g.say(s, a, fmt.Sprintf("We had dinner at %s, a tiny %s place near the %s. Best %s I've ever had.", restaurants[i], cuisines[i],
		pick(g.r, landmarks), dishes[i]), ref)
	// Asked at the next session: the question's relative date is read against its date.
	at := g.dates[s+1]
	ago := int(at.Sub(g.dates[s]).Hours() / 24)
	when := fmt.Sprintf("%d days ago", ago)
	if lastWeek(g.dates[s], at) {
		when = "last week"
	}
	g.ask(Temporal, fmt.Sprintf("What was the %s restaurant %s mentioned %s?", cuisines[i], a, when),
		at.Add(20*time.Hour).Format(time.RFC3339), ref)
}

// lastWeek reports whether d falls in the Monday-to-Sunday week before at's.
func lastWeek(d, at time.Time) bool {
	monday := at.AddDate(0, 0, -((int(at.Weekday()) + 6) % 7))
	return !d.Before(monday.AddDate(0, 0, -7)) && d.Before(monday)
}

func (g *gen) diet(a, b string) {
	s := g.r.IntN(sessions)
	d := pick(g.r, diets)
	m := months[(int(g.dates[s].Month())+10)%12]
	ref := g.ref("diet", a)
	g.say(s, a, fmt.Sprintf("I stopped %s back in %s, and honestly I sleep better.", d.stopped, m), ref)
	g.say(s, b, "I could never, but good for you.", "")
	g.ask(SingleHop, fmt.Sprintf("What did %s give up?", a), "", ref)
}

// noAnswers asks what the dialogue never says: an event a speaker did not have, a
// person never mentioned, a city nobody visited.
func (g *gen) noAnswers() {
	a, b := g.d.Speakers[0], g.d.Speakers[1]
	has := map[string]bool{}
	for _, s := range g.lines {
		for _, l := range s {
			if l.ref != "" {
				has[strings.Split(l.ref, "/")[1]+"/"+l.speaker] = true
			}
		}
	}
	for _, who := range []string{a, b} {
		if !has["pet1/"+who] {
			g.ask(NoAnswer, fmt.Sprintf("What is the name of %s's parrot?", who), "")
		} else {
			g.ask(NoAnswer, fmt.Sprintf("Which vet does %s take the pet to?", who), "")
		}
		if !has["job1/"+who] {
			g.ask(NoAnswer, fmt.Sprintf("Which company did %s join?", who), "")
		} else {
			g.ask(NoAnswer, fmt.Sprintf("How much does %s earn?", who), "")
		}
		if !has["lessons/"+who] {
			g.ask(NoAnswer, fmt.Sprintf("What instrument does %s practise?", who), "")
		}
	}
	unvisited := g.city()
	g.ask(NoAnswer, fmt.Sprintf("When did %s visit %s?", a, unvisited), "")
	p := pick(g.r, unknownPeople)
	g.ask(NoAnswer, fmt.Sprintf("What does %s do for a living?", p), "")
}

// layout turns session s's planned lines into turns: an opener, the events' lines in
// the order planned with chit-chat between them, and a closer.
func (g *gen) layout(s int) {
	a, b := g.d.Speakers[0], g.d.Speakers[1]
	if s%2 == 1 {
		a, b = b, a
	}
	var out []line
	chat := func(who, other string) {
		// The pool's lines in turn, each line once per speaker: a second pass gives the
		// lines to whoever has not said them.
		for {
			for i, t := range g.chat {
				if !g.said[who+t] {
					g.said[who+t] = true
					g.chat = append(g.chat[:i:i], g.chat[i+1:]...)
					out = append(out, line{speaker: who, text: strings.ReplaceAll(t, "{o}", other)})
					return
				}
			}
			g.chat = perm(g.r, chitChat)
		}
	}
	chat(a, b)
	chat(b, a)
	for _, l := range g.lines[s] {
		out = append(out, l)
		if g.r.IntN(2) == 0 {
			other := a
			if l.speaker == a {
				other = b
			}
			chat(other, l.speaker)
		}
	}
	for len(out) < 12+g.r.IntN(5) {
		if len(out)%2 == 0 {
			chat(a, b)
		} else {
			chat(b, a)
		}
	}
	at := g.dates[s].Add(time.Duration(18*60+g.r.IntN(180)) * time.Minute)
	sess := Session{Date: g.dates[s].Format("2006-01-02")}
	for i, l := range out {
		key := fmt.Sprintf("%s-s%d-t%02d", g.d.ID, s+1, i+1)
		if l.ref != "" {
			g.keys[l.ref] = key
		}
		sess.Turns = append(sess.Turns, Turn{Key: key, Speaker: l.speaker, Value: l.speaker + ": " + l.text,
			ValidAt: at.Add(time.Duration(i) * time.Minute)})
	}
	g.d.Sessions = append(g.d.Sessions, sess)
}

// check refuses a corpus the suite could not measure honestly.
func check(c Corpus) error {
	count := map[string]map[string]int{}
	for _, d := range c.Dialogues {
		seen := map[string]bool{}
		for _, s := range d.Sessions {
			for _, t := range s.Turns {
				if seen[t.Value] {
					return fmt.Errorf("%s: %q said twice", d.ID, t.Value)
				}
				seen[t.Value] = true
			}
		}
	}
	texts := map[string]bool{}
	for _, q := range c.Questions {
		if texts[q.Dialogue+q.Query] {
			return fmt.Errorf("%s repeats %q", q.ID, q.Query)
		}
		texts[q.Dialogue+q.Query] = true
		if count[q.Half] == nil {
			count[q.Half] = map[string]int{}
		}
		count[q.Half][q.Kind]++
		if (q.Kind == NoAnswer) != (len(q.Expected) == 0) {
			return fmt.Errorf("%s (%s) expects %v", q.ID, q.Kind, q.Expected)
		}
	}
	for _, half := range []string{"tuning", "held_out"} {
		for _, k := range []string{SingleHop, Temporal, MultiHop, NoAnswer} {
			if count[half][k] < 10 {
				return fmt.Errorf("%s: %d %s questions, want at least 10", half, count[half][k], k)
			}
		}
	}
	return nil
}
