package main

import "fmt"

// q is a query as written here: its text and the keys that answer it.
type q struct {
	text     string
	expected []string
}

// Clock is the time the suite's planner reads relative dates against ("next month"):
// a temporal query's expected keys are right at this instant.
const Clock = "2025-04-10T09:00:00Z"

// Paraphrase queries ask for a fact in other words than the memory's own.
var paraphraseQueries = []q{
	{"Which colleague is allergic to nuts?", []string{"person.daniel-okafor.allergy"}},
	{"How do I get reimbursed for something I bought for work?", []string{"procedure.expense-claims"}},
	{"What should I do when I'm too unwell to come in?", []string{"procedure.sick-leave"}},
	{"Can I bring my puppy to work?", []string{"policy.pets-in-office"}},
	{"When was the company started?", []string{"event.founding"}},
	{"How much money did we raise in our most recent investment round?", []string{"event.series-b"}},
	{"What's the nightly accommodation limit on business trips?", []string{"procedure.travel-booking"}},
	{"Why doesn't our sensor box use narrowband cellular?", []string{"decision.lte-m-over-nbiot"}},
	{"I accidentally pushed a credential to git, what now?", []string{"procedure.secret-rotation"}},
	{"For how many years do we keep old temperature measurements?", []string{"decision.data-retention"}},
	{"Who answers support tickets first thing in the morning in Kenya?", []string{"person.musa-otieno.shifts"}},
	{"Is it fine to work from a beach in Spain for a few weeks?", []string{"policy.working-abroad"}},
	{"How long can a new mother or father stay home on full pay?", []string{"policy.parental-leave"}},
	{"Why did we drop our old message queue?", []string{"decision.kafka-over-rabbitmq"}},
	{"Who has to sign off on a big price cut for a prospect?", []string{"procedure.sales-discount"}},
	{"May I paste client information into ChatGPT?", []string{"policy.ai-assistants"}},
	{"What kind of computer will I be handed as a developer?", []string{"decision.laptop-standard"}},
	{"During which part of the day should everyone be reachable?", []string{"policy.core-hours"}},
	{"How do I get a slot in the chief executive's diary?", []string{"person.lotte-de-vries.assistant"}},
	{"What is my yearly allowance for professional development?", []string{"procedure.learning-budget"}},
}

// Keyword queries hinge on a rare term: an id, a code name, a product.
var keywordQueries = []q{
	{"TW-1042", []string{"project.hollowmere.tracker"}},
	{"ACC-30522", []string{"customer.savanna-fresh"}},
	{"INC-2317", []string{"incident.inc-2317"}},
	{"ADR-021", []string{"decision.lte-m-over-nbiot"}},
	{"Quectel BG95", []string{"vendor.quectel"}},
	{"SHT45", []string{"vendor.sensirion"}},
	{"Slido", []string{"person.lotte-de-vries.all-hands"}},
	{"OSCP", []string{"person.brian-osullivan.certifications"}},
	{"Geekbot", []string{"team.platform.standup"}},
	{"Atlantis", []string{"decision.terraform"}},
	{"Unleash", []string{"decision.feature-flags"}},
	{"Fjordline Ventures", []string{"event.series-b"}},
	{"Sintra", []string{"event.offsite-2024"}},
	{"Kandji", []string{"policy.personal-devices"}},
	{"1NCE", []string{"vendor.1nce"}},
	{"TravelPerk", []string{"procedure.travel-booking"}},
	{"Coverflex", []string{"office.porto.lunch"}},
	{"mlflow.internal.tidewell.io", []string{"decision.mlflow"}},
	{"ACC-30830", []string{"customer.terra-verde"}},
	{"Lighthouse developer portal", []string{"team.platform.mission"}},
}

// Key-name queries name a memory's key, verbatim or by its words.
var keyNameQueries = []q{
	{"project.hollowmere.deadline", []string{"project.hollowmere.deadline"}},
	{"porto office wifi", []string{"office.porto.wifi"}},
	{"person.daniel-okafor.allergy", []string{"person.daniel-okafor.allergy"}},
	{"sre oncall", []string{"team.sre.oncall"}},
	{"decision monorepo", []string{"decision.monorepo"}},
	{"procedure.hotfix", []string{"procedure.hotfix"}},
	{"policy gifts", []string{"policy.gifts"}},
	{"quokka status", []string{"project.quokka.status"}},
	{"rotterdam parking", []string{"office.rotterdam.parking"}},
	{"customer nordkyl", []string{"customer.nordkyl"}},
	{"glossary heartbeat", []string{"glossary.heartbeat"}},
	{"event.fiscal-year", []string{"event.fiscal-year"}},
	{"mei lin chua birthday", []string{"person.mei-lin-chua.birthday"}},
	{"payments standup", []string{"team.payments.standup"}},
	{"vendor pagerduty", []string{"vendor.pagerduty"}},
	{"tundra tracker", []string{"project.tundra.tracker"}},
	{"data deletion request procedure", []string{"procedure.data-deletion-request"}},
	{"henrik lund delegate", []string{"person.henrik-lund.delegate"}},
	{"incident.inc-2444", []string{"incident.inc-2444"}},
	{"krakow rooms", []string{"office.krakow.rooms"}},
}

// Multi-fact queries need two or three memories together.
var multiFactQueries = []q{
	{"Who leads Hollowmere and when is it due?", []string{"project.hollowmere.lead", "project.hollowmere.deadline"}},
	{"Which customer accounts does Grace Wanjiku handle, and which office is she in?", []string{"person.grace-wanjiku.accounts", "person.grace-wanjiku.office"}},
	{"What is Saltmarsh for and what is holding it up?", []string{"project.saltmarsh.goal", "project.saltmarsh.status", "decision.tax-engine"}},
	{"Who heads security, and how do I report a phishing email?", []string{"team.security.lead", "person.katarzyna-nowak.role", "person.katarzyna-nowak.reporting"}},
	{"Nairobi office address and wifi", []string{"office.nairobi.address", "office.nairobi.wifi"}},
	{"When did Ana Ribeiro join and what languages does she speak?", []string{"person.ana-ribeiro.start-date", "person.ana-ribeiro.languages"}},
	{"What went wrong in INC-2317, and how are firmware releases rolled out now?", []string{"incident.inc-2317", "procedure.firmware-release"}},
	{"Who approves big spending, and who stands in when the CFO is away?", []string{"person.henrik-lund.approvals", "person.henrik-lund.delegate"}},
	{"What does the Firmware team own and who leads it?", []string{"team.firmware.mission", "team.firmware.lead", "person.elif-yilmaz.role"}},
	{"What is the per-sensor price, and which project builds the billing for it?", []string{"decision.pricing-per-sensor", "project.saltmarsh.goal"}},
	{"How do I declare an incident, and when is a postmortem required?", []string{"procedure.incident-declaration", "procedure.postmortem"}},
	{"How do I get production database access and who approves it?", []string{"procedure.access-request", "person.femi-adeyemi.access"}},
	{"When does the driver app ship, and by when must QA get the release candidate?", []string{"procedure.mobile-release", "person.oksana-hrytsenko.releases"}},
	{"Where is Kofi Mensah based and which certification is he preparing for?", []string{"person.kofi-mensah.office", "person.kofi-mensah.learning"}},
	{"What is Project Kingfisher for and who runs it?", []string{"project.kingfisher.goal", "project.kingfisher.lead"}},
	{"Where was the 2024 offsite and where is the 2025 one?", []string{"event.offsite-2024", "event.offsite-2025"}},
	{"Where is EU customer data stored and how long are readings retained?", []string{"decision.eu-data-residency", "decision.data-retention"}},
	{"Aurora Seafood's account and the incident that delayed their excursion alerts", []string{"customer.aurora-seafood", "incident.inc-2401"}},
	{"How should Data Science track its experiments?", []string{"decision.mlflow", "person.mei-lin-chua.experiments"}},
	{"What is the Rotterdam office address, and can I bring my dog there?", []string{"office.rotterdam.address", "policy.pets-in-office"}},
	{"Who leads Tundra and what is its next milestone?", []string{"project.tundra.lead", "project.tundra.deadline"}},
	{"Where is the Porto office and is there parking?", []string{"office.porto.address", "office.porto.parking"}},
	{"Who leads Mobile and when is their standup?", []string{"team.mobile.lead", "team.mobile.standup"}},
	{"What does Bramblewood do and who leads it?", []string{"project.bramblewood.goal", "project.bramblewood.lead"}},
	{"Which office is Wanjiru Kamau in and when did she join?", []string{"person.wanjiru-kamau.office", "person.wanjiru-kamau.start-date"}},
	{"What is Halcyon's goal and how far along is it?", []string{"project.halcyon.goal", "project.halcyon.status"}},
	{"Which channel does Finance use and when does the team meet?", []string{"team.finance.channel", "team.finance.standup"}},
	{"Who leads the Legal team and how do I request a contract review?", []string{"team.legal.lead", "team.legal.channel"}},
	{"What is Ostara and when is it due?", []string{"project.ostara.goal", "project.ostara.deadline"}},
	{"Where is the Montréal office and how does parking work there?", []string{"office.montreal.address", "office.montreal.parking"}},
}

// Temporal queries ask by a date or a span of time, absolute or relative to Clock;
// the answer states a date in it, in one of the corpus's four date formats.
var temporalQueries = []q{
	{"Who joined Tidewell in June 2021?", []string{"person.pieter-jansen.start-date"}},
	{"Who started at Tidewell in March 2019?", []string{"person.ana-ribeiro.start-date"}},
	{"Which colleague joined in September 2022?", []string{"person.leila-ahmadi.start-date"}},
	{"Who joined the company in May 2020?", []string{"person.claire-dubois.start-date"}},
	{"Who was hired in February 2023?", []string{"person.nadia-haddad.start-date"}},
	{"Which projects are due in May 2025?", []string{"project.bramblewood.deadline", "project.mistral.deadline"}},
	{"Which project deadline was in October 2024?", []string{"project.pemberton.deadline"}},
	{"What is due next month?", []string{"project.bramblewood.deadline", "project.mistral.deadline"}},
	{"Which project deadlines fall this month?", []string{"project.marigold.deadline", "project.cobblestone.deadline", "project.pelican.deadline"}},
	{"Which project was due six months ago?", []string{"project.pemberton.deadline"}},
	{"Which incident happened in September 2024?", []string{"incident.inc-2388"}},
	{"Which project is due on 14 February 2025?", []string{"project.halcyon.deadline"}},
	{"Who joined Tidewell in 2023?", []string{"person.musa-otieno.start-date", "person.nadia-haddad.start-date", "person.ingrid-solberg.start-date"}},
	{"What went wrong in July 2024?", []string{"incident.inc-2356"}},
	{"Which projects must be finished by the end of June 2025?", []string{"project.ostara.deadline", "project.ember.deadline"}},
}

// No-answer queries ask about what the corpus never mentions; some are near misses
// (an office, a project or an incident that does not exist). The general ones come
// first; the three near-miss kinds after them have their own tables.
var noAnswerQueries = []q{
	{"What is Tidewell's stock ticker symbol?", nil},
	{"Who won the table tennis tournament at the offsite?", nil},
	{"Where do I park at the Singapore office?", nil},
	{"What is the canteen's lasagna recipe?", nil},
	{"When does project Zephyr ship?", nil},
	{"Who is the head of marketing?", nil},
	{"Which dental insurance provider do we use?", nil},
	{"How many unused vacation days carry over into next year?", nil},
	{"What is the guest wifi password at the Berlin office?", nil},
	{"Which quantum computing vendor do we work with?", nil},
	{"What is Ana Ribeiro's shoe size?", nil},
	{"When is the IPO planned?", nil},
	{"What is the company car policy?", nil},
	{"Who maintains the Windows build servers?", nil},
	{"What is our blockchain strategy?", nil},
	{"Does the company pay for gym memberships?", nil},
	{"Who sponsors the company football team?", nil},
	{"What happened in INC-9999?", nil},
	{"Does the gateway fall back to Iridium satellites?", nil},
	{"How do I book the company ski chalet?", nil},
}

// Attribute queries ask about a person, team, project or office the corpus knows,
// for something it never stored about them.
var attributeQueries = []q{
	{"What is Pieter Jansen's favourite football club?", nil},
	{"How tall is Ethan Roy?", nil},
	{"What car does Priya Natarajan drive?", nil},
	{"When is Lotte de Vries's birthday?", nil},
	{"Who is Daniel Okafor's dentist?", nil},
	{"What is Wanjiru Kamau's salary?", nil},
	{"What is the headcount of the Legal team?", nil},
	{"What is Hollowmere's budget?", nil},
	{"Which vegan restaurants are near the Kraków office?", nil},
	{"How many desks does the Porto office have?", nil},
}

// Person queries ask about someone the corpus never mentions, some sharing a first
// name or most of a surname with someone it does.
var personQueries = []q{
	{"Where does Marcus Feldman work?", nil},
	{"Who does Priya Raman report to?", nil},
	{"What is Sophie Laurent's role?", nil},
	{"When did Kenji Watanabe join Tidewell?", nil},
	{"Which team is Oliver Brandt on?", nil},
	{"What languages does Lucia Moretti speak?", nil},
	{"Is Tomasz Kowalski on call this week?", nil},
	{"Who is Ana Silva's manager?", nil},
	{"How do I reach Hugo Martins?", nil},
	{"What does Nkechi Adebayo work on?", nil},
}

// Place queries ask about an office in a city the company has none in; the same fact
// is stored for the offices it has.
var placeQueries = []q{
	{"What is the wifi password at the Madrid office?", nil},
	{"Where do I park at the Warsaw office?", nil},
	{"What is the address of the Toronto office?", nil},
	{"How do I get a badge for the Dublin office?", nil},
	{"When is lunch served in the Stockholm office?", nil},
	{"Which meeting rooms does the Vienna office have?", nil},
	{"What time does the Lyon office open?", nil},
	{"Who runs the Zurich office?", nil},
	{"Is there a canteen in the Prague office?", nil},
	{"Can I bring my dog to the Oslo office?", nil},
}

func queries() []Query {
	var out []Query
	for _, group := range []struct {
		category, kind, prefix string
		qs                     []q
	}{
		{Paraphrase, "", "para", paraphraseQueries}, {Keyword, "", "kw", keywordQueries}, {KeyName, "", "key", keyNameQueries},
		{MultiFact, "", "multi", multiFactQueries}, {Temporal, "", "time", temporalQueries},
		{NoAnswer, KindGeneral, "none", noAnswerQueries}, {NoAnswer, KindAttribute, "attr", attributeQueries},
		{NoAnswer, KindPerson, "who", personQueries}, {NoAnswer, KindPlace, "where", placeQueries},
	} {
		for i, x := range group.qs {
			exp := x.expected
			if exp == nil {
				exp = []string{}
			}
			out = append(out, Query{ID: fmt.Sprintf("%s-%02d", group.prefix, i+1), Category: group.category, Kind: group.kind,
				Query: x.text, Expected: exp})
		}
	}
	return out
}
