package main

// person is one employee. Each gets a role, an office and a start date rendered from
// these fields, and one hand-written fact under person.<slug>.<topic>.
type person struct {
	slug, name string
	first      string // what colleagues call them, when not the first word of name
	pron       string // he, she or they
	role       string // a job title; a full sentence for someone outside a team
	team       string
	manager    string // "" for a team's lead
	office     string
	remote     string // the town a remote employee lives in
	start      string
	topic      string
	pref       string
}

func (p person) possessive() string {
	switch p.pron {
	case "he":
		return "his"
	case "she":
		return "her"
	}
	return "their"
}

func (p person) firstName() string {
	if p.first != "" {
		return p.first
	}
	for i, r := range p.name {
		if r == ' ' {
			return p.name[:i]
		}
	}
	return p.name
}

var people = []person{
	{slug: "lotte-de-vries", name: "Lotte de Vries", pron: "she", office: "rotterdam", start: "2017-10-12",
		role:  "Lotte de Vries is the co-founder and chief executive officer of Tidewell.",
		topic: "all-hands", pref: "Lotte likes all-hands questions submitted anonymously in Slido beforehand and answers the top-voted ones first."},
	{slug: "rafael-souza", name: "Rafael Souza", pron: "he", office: "porto", start: "2017-10-12",
		role:  "Rafael Souza co-founded Tidewell and is its CTO; every engineering lead reports to him.",
		topic: "architecture", pref: "Rafael reviews architecture proposals only as written RFCs; he does not make design decisions on a whiteboard."},
	{slug: "jeroen-van-dijk", name: "Jeroen van Dijk", pron: "he", role: "an engineering manager", team: "platform", office: "rotterdam", start: "2018-09-03",
		topic: "meetings", pref: "Jeroen keeps Wednesday mornings free of meetings and declines invites that land there without an agenda."},
	{slug: "ana-ribeiro", name: "Ana Ribeiro", pron: "she", role: "a staff engineer", team: "platform", manager: "jeroen-van-dijk", office: "porto", start: "2019-03-04",
		topic: "communication", pref: "Ana prefers written design docs to calls: send her a doc link in #platform-eng and she replies within a day."},
	{slug: "pieter-jansen", name: "Pieter Jansen", pron: "he", role: "a platform engineer", team: "platform", manager: "jeroen-van-dijk", office: "rotterdam", start: "2021-06-14",
		topic: "desk", pref: "Pieter has a standing desk by the window on the fifth floor and likes quiet, music-free mornings."},
	{slug: "priya-natarajan", name: "Priya Natarajan", pron: "she", role: "an engineering manager", team: "payments", office: "rotterdam", start: "2019-11-18",
		topic: "one-on-ones", pref: "Priya holds her one-on-ones as walking meetings along the Maas whenever the weather allows."},
	{slug: "tomasz-wrobel", name: "Tomasz Wróbel", pron: "he", role: "a senior backend engineer", team: "payments", manager: "priya-natarajan", office: "krakow", start: "2020-02-10",
		topic: "code-review", pref: "Tomasz likes pull requests under 400 lines and asks for a screenshot with any change to the UI."},
	{slug: "ethan-roy", name: "Ethan Roy", pron: "he", role: "a frontend engineer", team: "payments", manager: "priya-natarajan", office: "montreal", start: "2022-08-22",
		topic: "frontend", pref: "Ethan pushes for TypeScript strict mode and checks every new component for keyboard navigation."},
	{slug: "wanjiru-kamau", name: "Wanjiru Kamau", pron: "she", role: "the tech lead", team: "ingest", office: "nairobi", start: "2018-05-07",
		topic: "schedule", pref: "Wanjiru starts at 07:00 Nairobi time and is offline after 16:00, so cross-office calls with her go before noon CET."},
	{slug: "lucas-tremblay", name: "Lucas Tremblay", pron: "he", role: "a backend engineer", team: "ingest", manager: "wanjiru-kamau", office: "montreal", start: "2021-01-11",
		topic: "language", pref: "Lucas is a native French speaker and takes the French-language support escalations from customers in Québec."},
	{slug: "aisha-njoroge", name: "Aisha Njoroge", pron: "she", role: "a data engineer", team: "ingest", manager: "wanjiru-kamau", office: "nairobi", start: "2022-04-04",
		topic: "data-handoff", pref: "Aisha prefers Parquet to CSV for any data hand-off and documents every schema in the data catalog."},
	{slug: "alexandre-cote", name: "Alexandre Côté", pron: "he", role: "a staff engineer", team: "ingest", manager: "wanjiru-kamau", office: "montreal", remote: "Québec City", start: "2019-07-15",
		topic: "mentoring", pref: "Alexandre mentors two junior engineers and keeps Friday afternoons open for anyone who wants a code walkthrough."},
	{slug: "sofia-marques", name: "Sofia Marques", pron: "she", role: "the mobile lead", team: "mobile", office: "porto", start: "2019-09-02",
		topic: "feedback", pref: "Sofia wants critical feedback in private first, never in the team channel, and gives hers the same way."},
	{slug: "daniel-okafor", name: "Daniel Okafor", pron: "he", role: "an iOS engineer", team: "mobile", manager: "sofia-marques", office: "rotterdam", start: "2020-10-05",
		topic: "allergy", pref: "Daniel has a severe peanut allergy, so team lunches must be ordered nut-free."},
	{slug: "beatriz-lopes", name: "Beatriz Lopes", pron: "she", role: "an Android engineer", team: "mobile", manager: "sofia-marques", office: "porto", start: "2021-03-01",
		topic: "bug-reports", pref: "Beatriz wants every Android bug report to name the device model and the app build number."},
	{slug: "oksana-hrytsenko", name: "Oksana Hrytsenko", pron: "she", role: "a QA engineer", team: "mobile", manager: "sofia-marques", office: "krakow", start: "2022-11-07",
		topic: "releases", pref: "Oksana needs release candidates on TestFlight by Tuesday to finish regression runs before Thursday's release."},
	{slug: "mei-lin-chua", name: "Mei Lin Chua", first: "Mei Lin", pron: "she", role: "head of data science", team: "datasci", office: "rotterdam", start: "2020-01-06",
		topic: "experiments", pref: "Mei Lin asks that every model experiment be logged in MLflow, with the dataset hash, before anyone discusses it in review."},
	{slug: "hamid-rostami", name: "Hamid Rostami", pron: "he", role: "a machine learning engineer", team: "datasci", manager: "mei-lin-chua", office: "montreal", start: "2021-09-13",
		topic: "hours", pref: "Hamid works a compressed week, Monday to Thursday, ten hours a day; don't expect replies from him on Fridays."},
	{slug: "nadia-haddad", name: "Nadia Haddad", pron: "she", role: "a data scientist", team: "datasci", manager: "mei-lin-chua", office: "porto", start: "2023-02-20",
		topic: "charts", pref: "Nadia presents results with confidence intervals and refuses to use pie charts."},
	{slug: "katarzyna-nowak", name: "Katarzyna Nowak", first: "Kasia", pron: "she", role: "head of security", team: "security", office: "krakow", start: "2019-05-20",
		topic: "reporting", pref: "Kasia wants suspected phishing forwarded as an attachment to the phishing mailbox in Outlook, not sent as a screenshot."},
	{slug: "brian-osullivan", name: "Brian O'Sullivan", pron: "he", role: "a security engineer", team: "security", manager: "katarzyna-nowak", office: "rotterdam", start: "2021-04-12",
		topic: "coffee", pref: "Brian drinks only oat flat whites and keeps a box of Barry's tea in the Rotterdam kitchen for guests."},
	{slug: "femi-adeyemi", name: "Femi Adeyemi", pron: "he", role: "a security engineer", team: "security", manager: "katarzyna-nowak", office: "nairobi", start: "2022-06-01",
		topic: "access", pref: "Femi only approves production access that was requested through Teleport and carries a ticket number."},
	{slug: "fatima-benali", name: "Fatima Zahra Benali", first: "Fatima", pron: "she", role: "the SRE lead", team: "sre", office: "rotterdam", start: "2018-11-26",
		topic: "paging", pref: "Fatima prefers to be paged by phone call, not text message, for any SEV1 outside office hours."},
	{slug: "kofi-mensah", name: "Kofi Mensah", pron: "he", role: "a site reliability engineer", team: "sre", manager: "fatima-benali", office: "nairobi", start: "2022-01-17",
		topic: "learning", pref: "Kofi is studying for the CKA exam and likes to be paired with someone on Kubernetes cluster upgrades."},
	{slug: "jakub-zielinski", name: "Jakub Zieliński", pron: "he", role: "a site reliability engineer", team: "sre", manager: "fatima-benali", office: "krakow", start: "2020-07-06",
		topic: "alerts", pref: "Jakub silences alerts nobody can act on and asks that every new alert link to a runbook."},
	{slug: "elif-yilmaz", name: "Elif Yılmaz", pron: "she", role: "the firmware lead", team: "firmware", office: "krakow", start: "2018-03-19",
		topic: "bench-logs", pref: "Elif insists that firmware changes come with a test log from the bench rig before they are merged."},
	{slug: "marek-dvorak", name: "Marek Dvořák", pron: "he", role: "an embedded engineer", team: "firmware", manager: "elif-yilmaz", office: "krakow", start: "2019-10-14",
		topic: "pairing", pref: "Marek prefers pairing over a shared tmux session instead of screen sharing; his session is called marek-pair."},
	{slug: "diego-fernandez", name: "Diego Fernández", pron: "he", role: "a firmware engineer", team: "firmware", manager: "elif-yilmaz", office: "porto", start: "2021-11-29",
		topic: "spare-hardware", pref: "Diego keeps the spare TW-7 gateways in locker 12 in Porto and writes down who borrows one."},
	{slug: "ines-carvalho", name: "Inês Carvalho", pron: "she", role: "the design lead", team: "design", office: "porto", start: "2019-04-01",
		topic: "critique", pref: "Inês wants Figma links shared a day before her design critique so people arrive having looked."},
	{slug: "noah-friedman", name: "Noah Friedman", pron: "they", role: "a product designer", team: "design", manager: "ines-carvalho", office: "montreal", start: "2022-03-28",
		topic: "accessibility", pref: "Noah checks every new screen against WCAG 2.2 AA contrast and will block a release that fails it."},
	{slug: "olivier-gagnon", name: "Olivier Gagnon", pron: "he", role: "head of customer success", team: "success", office: "montreal", start: "2019-08-19",
		topic: "reports", pref: "Olivier wants the weekly churn-risk report in his inbox by Monday 09:00 Eastern time."},
	{slug: "grace-wanjiku", name: "Grace Wanjiku", pron: "she", role: "a customer success manager", team: "success", manager: "olivier-gagnon", office: "nairobi", start: "2021-05-24",
		topic: "escalations", pref: "Grace prefers to hear about customer escalations by phone; she reads email only twice a day."},
	{slug: "musa-otieno", name: "Musa Otieno", pron: "he", role: "a support engineer", team: "success", manager: "olivier-gagnon", office: "nairobi", start: "2023-01-09",
		topic: "shifts", pref: "Musa covers the early support shift, 06:00 to 14:00 EAT, and hands over in #support-handover."},
	{slug: "rutger-bakker", name: "Rutger Bakker", pron: "he", role: "VP of sales", team: "sales", office: "rotterdam", start: "2018-02-12",
		topic: "travel", pref: "Rutger books his own travel and takes the train instead of flying for any trip under six hours."},
	{slug: "chloe-lefebvre", name: "Chloé Lefebvre", pron: "she", role: "an account executive", team: "sales", manager: "rutger-bakker", office: "montreal", start: "2020-09-21",
		topic: "crm", pref: "Chloé asks that every customer call be logged in HubSpot on the same day, with the agreed next steps."},
	{slug: "thijs-visser", name: "Thijs Visser", pron: "he", role: "a solutions engineer", team: "sales", manager: "rutger-bakker", office: "rotterdam", start: "2021-02-15",
		topic: "demos", pref: "Thijs runs his demos on the staging tenant demo-eu and asks engineers not to reset it on Thursdays."},
	{slug: "amara-diallo", name: "Amara Diallo", pron: "she", role: "head of people", team: "people", office: "rotterdam", start: "2019-01-14",
		topic: "office-hours", pref: "Amara holds open office hours every Thursday from 14:00 to 16:00 CET for any question about working here."},
	{slug: "joana-pires", name: "Joana Pires", pron: "she", role: "a recruiter", team: "people", manager: "amara-diallo", office: "porto", start: "2022-07-04",
		topic: "referrals", pref: "Joana wants candidate referrals sent through the Greenhouse referral form, not over Slack."},
	{slug: "claire-dubois", name: "Claire Dubois", pron: "she", role: "the office manager", team: "people", manager: "amara-diallo", office: "montreal", start: "2020-05-11",
		topic: "requests", pref: "Claire takes office supply requests in the #montreal-office channel rather than by direct message."},
	{slug: "henrik-lund", name: "Henrik Lund", pron: "he", role: "chief financial officer", team: "finance", office: "rotterdam", start: "2020-03-02",
		topic: "approvals", pref: "Henrik approves spending over 10,000 euros only with a one-page business case attached."},
	{slug: "zuzanna-kowalczyk", name: "Zuzanna Kowalczyk", pron: "she", role: "the financial controller", team: "finance", manager: "henrik-lund", office: "krakow", start: "2021-08-09",
		topic: "invoices", pref: "Zuzanna needs supplier invoices as PDF files with the purchase order number in the file name."},
	{slug: "marta-sousa", name: "Marta Sousa", pron: "she", role: "a payroll specialist", team: "finance", manager: "henrik-lund", office: "porto", start: "2022-10-17",
		topic: "payroll-cutoff", pref: "Marta closes payroll changes on the 20th of each month; anything later moves to the following month."},
	{slug: "samuel-achieng", name: "Samuel Achieng", pron: "he", role: "general counsel", team: "legal", office: "nairobi", remote: "Mombasa", start: "2020-06-08",
		topic: "contracts", pref: "Samuel asks for contract review requests at least five working days before the signature date."},
	{slug: "leila-ahmadi", name: "Leila Ahmadi", pron: "she", role: "privacy counsel", team: "legal", manager: "samuel-achieng", office: "rotterdam", start: "2022-09-05",
		topic: "dpa", pref: "Leila reviews every data processing agreement herself and wants redlines in Word, not comments on a PDF."},
	{slug: "margot-lambert", name: "Margot Lambert", pron: "she", role: "VP of product", team: "product", office: "montreal", start: "2019-02-25",
		topic: "meetings", pref: "Margot caps recurring meetings at 25 minutes and ends them as soon as the agenda is done."},
	{slug: "yuki-tanaka", name: "Yuki Tanaka", pron: "she", role: "a product manager", team: "product", manager: "margot-lambert", office: "rotterdam", start: "2021-10-04",
		topic: "roadmap", pref: "Yuki keeps the roadmap in Productboard and asks that feature requests be filed there, tagged with the customer's name."},
	{slug: "hannah-schmidt", name: "Hannah Schmidt", pron: "she", role: "a technical writer", team: "product", manager: "margot-lambert", office: "rotterdam", remote: "Leipzig", start: "2022-05-16",
		topic: "style-guide", pref: "Hannah maintains the docs style guide: sentence-case headings, no Latin abbreviations, one idea per paragraph."},
	{slug: "ingrid-solberg", name: "Ingrid Solberg", pron: "she", role: "a program manager", team: "product", manager: "margot-lambert", office: "rotterdam", start: "2023-04-11",
		topic: "planning", pref: "Ingrid runs quarterly planning from a shared spreadsheet and freezes it on the Friday before the quarter starts."},
}

// personExtras are further facts about some people, under person.<key>.
var personExtras = []struct{ key, value string }{
	{"ana-ribeiro.languages", "Ana speaks Portuguese, English and conversational Dutch."},
	{"lotte-de-vries.assistant", "Lotte's calendar is run by her executive assistant, Femke Hoekstra; book time with Lotte through Femke."},
	{"rafael-souza.background", "Before co-founding Tidewell, Rafael built route-planning software at a Lisbon freight startup."},
	{"mei-lin-chua.birthday", "Mei Lin's birthday is on 17 August; her team usually brings Portuguese egg tarts."},
	{"wanjiru-kamau.talks", "Wanjiru gave the talk 'Backpressure at 40,000 sensors per second' at Kafka Summit London 2023."},
	{"henrik-lund.delegate", "When Henrik is away, Zuzanna Kowalczyk approves spending up to 25,000 euros in his place."},
	{"sofia-marques.leave", "Sofia is on parental leave from 1 June to 30 November 2025; Beatriz Lopes covers the mobile lead role meanwhile."},
	{"katarzyna-nowak.nickname", "Katarzyna Nowak goes by Kasia at work."},
	{"fatima-benali.signature", "Fatima Zahra Benali signs her messages as FZ in incident channels."},
	{"grace-wanjiku.accounts", "Grace is the customer success manager for the Savanna Fresh and Kilimo Cold accounts."},
	{"noah-friedman.pronouns", "Noah Friedman uses they/them pronouns."},
	{"thijs-visser.languages", "Thijs speaks Dutch, English and German and covers prospects in Germany, Austria and Switzerland."},
	{"brian-osullivan.certifications", "Brian holds the OSCP certification and runs the yearly internal capture-the-flag."},
	{"jakub-zielinski.dashboards", "Jakub maintains tidewell/grafana-dashboards, the repository of shared team dashboards."},
	{"elif-yilmaz.patents", "Elif is named on Tidewell's patent for adaptive sensor polling on battery power."},
	{"olivier-gagnon.languages", "Olivier runs customer business reviews in French or English, whichever the customer prefers."},
}
