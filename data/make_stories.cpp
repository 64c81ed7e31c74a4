// make_stories.cpp - writes plaingpt's default training corpus: about a megabyte of short, simple stories.
//
// Why generate the corpus instead of downloading one? It has to be small, free of licence questions,
// byte-identical on every machine, and - for the lesson on attention heads - every pronoun in it must have
// a known antecedent. A generator gives us all four.
//
// How it works: a story is a cast (people, things, places, an animal) plus an "arc", a list of beats.
// Each beat offers a few sentence templates and one is picked at random. A template is text with slots:
//
//   {A} {A.o} {A.p}   role A as subject / object / possessive: a name or noun phrase, or a pronoun
//   {A.n}             always the name or noun phrase ("Mira", "the twins", "a red kite" the first time)
//   {A.b}             the bare noun, after a determiner the template already wrote ("my {O.b}" -> "my kite")
//   {A:was/were}      the verb form that agrees with how A was last written ("Sam was", "they were")
//   {@list} {a@list}  a random entry from a word list; the second form puts "a" or "an" in front
//   {$list} {a$list}  an entry chosen once per story, so "learn to swim" stays "swim" to the end
//
// Roles: A B C people (C may be a group), O Q things, P R places, X an animal, S the last subject written.
// The writer uses a pronoun only when the reference is clear by construction: the referent was named in
// the last two sentences (the last one, for "it") and nothing else taking the same pronoun has been
// mentioned since. Every pronoun it writes is recorded with the offset of that name, and the whole record
// is checked at the end.
//
// Build: g++ -std=c++17 -O2 -Wall -Wextra data/make_stories.cpp -o /tmp/make_stories
// Run:   /tmp/make_stories --out data/stories.txt [--antecedents pronouns.tsv] [--mentions names.tsv] [--bytes N] [--seed S]
//        /tmp/make_stories --probes 2000 --out probes.txt --antecedents probes.tsv --mentions probe_names.tsv

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using Words = std::vector<std::string>;

// ---------------------------------------------------------------------------------------------- randomness
// splitmix64 uses integer arithmetic only, so every compiler and platform draws the same sequence.
// (std::uniform_int_distribution is implementation-defined, which would break byte-identical output.)
class Rng {
public:
    // The seed is scrambled first: splitmix steps its state by a constant, so seeds that differ by that
    // constant (or seed*constant by one step) would otherwise give the same stream shifted by one draw.
    explicit Rng(uint64_t seed) : state_(mix(seed ^ 0x2545F4914F6CDD1DULL)) {}
    uint64_t next() { return mix(state_ += 0x9E3779B97F4A7C15ULL); }
    size_t below(size_t n) { return static_cast<size_t>(next() % n); }  // the tiny modulo bias is harmless
    bool percent(unsigned p) { return below(100) < p; }
    template <class T> const T& pick(const std::vector<T>& items) { return items[below(items.size())]; }

private:
    static uint64_t mix(uint64_t z) {
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    uint64_t state_;
};

// ---------------------------------------------------------------------------------------------- the cast
const Words kSheNames = {
    "Mira", "Lena", "Ada", "Nora", "Ivy", "Rosa", "Maya", "Ella", "Clara", "Hana", "Lucy", "Emma", "Zoe",
    "Iris", "Greta", "Fatima", "Amara", "Leila", "Sofia", "Nina", "Priya", "Aisha", "Yuki", "Mei", "Olga",
    "Ingrid", "Hazel", "Ruth", "Esther", "Julia", "Tessa", "Daisy", "Martha", "Alice", "Grace", "Helen",
    "Irene", "June", "Kate", "Laura", "Molly", "Naomi", "Olive", "Paula", "Rita", "Sara", "Tara", "Una",
    "Vera", "Yara", "Zara", "Anya", "Bella", "Carmen", "Dina", "Elsa", "Freya", "Gloria", "Hilda", "Ines",
    "Kira", "Lola", "Mona", "Nadia", "Pia", "Rhea", "Selma", "Talia", "Uma", "Wilma", "Chloe", "Edith",
    "Flora", "Beatrix", "Agnes", "Marta"};
const Words kHeNames = {
    "Tom", "Omar", "Leo", "Ben", "Hugo", "Ivan", "Jack", "Karl", "Luis", "Max", "Noah", "Oscar", "Paul",
    "Raj", "Sven", "Theo", "Victor", "Walter", "Yusuf", "Aaron", "Felix", "George", "Henry", "Isaac", "Jonas",
    "Kofi", "Liam", "Marco", "Nils", "Otto", "Pedro", "Rafael", "Simon", "Tariq", "Vikram", "Wesley",
    "Xavier", "Zane", "Adam", "Bruno", "Carlos", "David", "Emil", "Finn", "Gus", "Hector", "Igor", "Jamal",
    "Kenji", "Lars", "Milo", "Nico", "Olaf", "Peter", "Quentin", "Ravi", "Stefan", "Tobias", "Vince", "Will",
    "Arjun", "Boris", "Caleb", "Dmitri", "Elias", "Frank", "Gideon", "Hamid", "Jasper", "Kwame", "Lucas",
    "Mateo", "Nathan", "Owen", "Pablo", "Ramon", "Seth"};
const Words kTheyNames = {  // characters who go by they/them
    "Alex", "Sam", "Robin", "Quinn", "Ash", "Kai", "Rowan", "Sky", "River", "Jules", "Charlie", "Morgan",
    "Remy", "Sasha", "Jordan", "Avery", "Ellis", "Noel"};
const Words kGroups = {  // written "the twins"; they take plural verbs
    "twins", "cousins", "fishermen", "farmers", "sailors", "neighbours", "monks", "musicians", "triplets",
    "children", "bakers", "weavers", "shepherds", "builders", "players", "gardeners"};
const Words kPlaces = {
    "market", "old mill", "river", "harbour", "forest", "bakery", "library", "village square", "lighthouse",
    "meadow", "orchard", "hill", "valley", "stone bridge", "train station", "school", "garden", "cellar",
    "attic", "barn", "farm", "lake", "beach", "cave", "castle", "clock tower", "museum", "post office",
    "village well", "duck pond", "wheat field", "pine wood", "marsh", "cliff path", "island", "fountain",
    "park", "playground", "bookshop", "tea house", "inn", "stable", "workshop", "greenhouse", "tool shed",
    "town hall", "fish market", "flower shop", "toy shop", "bus stop", "windmill", "waterfall", "quarry",
    "vineyard", "olive grove", "river bank", "city wall", "bell tower", "bandstand", "boathouse", "sawmill",
    "dairy", "mountain pass", "fairground", "harbour wall", "old chapel", "rose garden", "village hall",
    "school yard", "hay loft", "ferry dock", "fishing pier", "high street", "north road", "east gate",
    "cornfield", "sheep field", "hilltop", "birch wood", "snowy peak", "desert", "canyon", "seaside",
    "pottery", "laundry", "circus tent", "train yard", "bamboo grove", "spice market", "ice rink"};
const Words kThings = {
    "lamp", "kite", "scarf", "lantern", "key", "ring", "book", "hat", "cup", "bell", "flute", "drum", "ball",
    "map", "compass", "umbrella", "basket", "blanket", "coat", "boot", "glove", "spoon", "mirror", "clock",
    "watch", "coin", "shell", "pebble", "feather", "box", "jar", "bottle", "candle", "brush", "comb", "pen",
    "pencil", "notebook", "diary", "whistle", "button", "necklace", "bracelet", "brooch", "locket", "medal",
    "trophy", "teapot", "kettle", "pot", "pan", "ladle", "hammer", "shovel", "rake", "bucket", "rope", "net",
    "fishing rod", "paddle", "wagon", "sled", "bicycle", "scooter", "doll", "teddy bear", "puppet",
    "toy boat", "toy train", "marble", "spinning top", "yo-yo", "puzzle", "chess set", "violin", "guitar",
    "harmonica", "trumpet", "banjo", "accordion", "camera", "telescope", "magnifying glass", "backpack",
    "satchel", "purse", "wallet", "suitcase", "trunk", "pillow", "quilt", "rug", "vase", "bowl", "plate",
    "jug", "mug", "spyglass", "hourglass", "globe", "paintbrush", "sketchbook", "music box", "snow globe",
    "parasol", "fan", "shawl", "cloak", "apron", "belt", "crown", "toy sword", "shield", "helmet",
    "slingshot", "birdhouse", "flowerpot", "watering can", "wheelbarrow", "sack", "pouch", "ribbon",
    "thimble", "spool", "quill", "inkpot", "scroll", "letter", "postcard", "photograph", "painting",
    "figurine", "candlestick", "oil lamp", "torch", "radio", "alarm clock", "teacup", "wooden horse",
    "skipping rope", "lunch box", "pencil case", "sun hat", "raincoat", "wool hat", "keyring", "tin soldier",
    "rocking horse", "pinwheel", "tambourine", "recorder", "abacus", "ukulele", "bird whistle"};
const Words kThingAdjectives = {
    "red", "blue", "green", "yellow", "purple", "orange", "brown", "black", "white", "silver", "golden",
    "shiny", "old", "new", "little", "tiny", "big", "heavy", "wooden", "dusty", "pretty", "plain", "painted",
    "striped", "spotted", "bright", "strange", "special", "ancient", "small", "large", "worn", "clean",
    "lucky", "odd", "lovely", "precious", "handmade"};
const Words kAnimals = {
    "fox", "owl", "kitten", "puppy", "hedgehog", "rabbit", "duck", "goat", "lamb", "squirrel", "crow",
    "frog", "mouse", "badger", "deer", "pony", "parrot", "tortoise", "goose", "pigeon", "sparrow",
    "raccoon", "otter", "bat", "mole", "lizard", "donkey", "calf", "piglet", "chick", "magpie", "weasel"};
const Words kAnimalAdjectives = {
    "little", "small", "young", "tiny", "grey", "brown", "white", "spotted", "old", "shy", "muddy",
    "skinny", "fluffy", "striped"};

// ---------------------------------------------------------------------------------------------- word lists
// Entries may contain slots of their own; {S...} there means "whoever the sentence is about".
const std::map<std::string, Words> kWordLists = {
    {"near", {"near", "beside", "not far from", "close to", "just past", "across from", "a short walk from"}},
    {"job", {"baker", "farmer", "sailor", "painter", "weaver", "fisher", "potter", "gardener", "shepherd",
             "carpenter", "tailor", "teacher", "musician", "miller", "beekeeper", "blacksmith", "clockmaker",
             "bookbinder", "cook", "doctor", "builder", "librarian", "shopkeeper", "nurse", "inventor",
             "woodcutter", "goatherd", "glassblower", "storyteller", "candle maker", "toymaker", "student",
             "singer", "poet", "dancer", "juggler", "mapmaker", "ferry pilot"}},
    {"trait", {"kind", "clever", "shy", "cheerful", "curious", "brave", "quiet", "busy", "careful",
               "friendly", "gentle", "young", "old", "honest", "patient", "stubborn", "clumsy", "proud",
               "generous", "thoughtful", "lively", "sleepy", "hard-working", "restless", "humble", "polite",
               "tidy", "forgetful", "funny", "calm", "bold", "eager", "good-natured", "nervous", "wise"}},
    {"relation", {"neighbour", "cousin", "best friend", "classmate", "oldest friend", "teammate",
                  "friend from school", "closest friend", "childhood friend"}},
    {"dayadj", {"spring", "summer", "autumn", "winter", "cold", "warm", "bright", "grey", "windy",
                "snowy", "rainy", "foggy", "quiet", "sunny"}},
    {"time", {"morning", "afternoon", "evening", "Monday", "Tuesday", "Saturday", "Sunday", "market day",
              "rainy afternoon", "windy morning", "summer evening", "holiday", "snowy day", "autumn night"}},
    {"weekday", {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "morning",
                 "evening", "summer"}},
    {"searched", {"searched", "hunted", "looked", "rummaged", "hurried"}},
    {"container", {"drawer", "cupboard", "box", "basket", "pocket", "bag", "chest", "crate"}},
    {"hiding", {"pile of leaves", "old bench", "wooden cart", "hedge", "flowerpot", "stack of books",
                "heap of hay", "rusty bucket", "sack of flour", "upturned boat", "apple tree", "woodpile",
                "cushion", "garden wall", "rain barrel"}},
    {"hidden", {"under", "behind", "beside", "next to", "underneath"}},
    {"food", {"loaf of bread", "apple", "pear", "wedge of cheese", "jar of honey", "bag of nuts",
              "bunch of grapes", "plum cake", "slice of pie", "handful of cherries", "bottle of milk",
              "pot of jam", "sandwich", "orange", "bun", "boiled egg", "bag of figs"}},
    {"clothes", {"coat", "boots", "hat", "scarf", "cloak", "gloves", "jacket", "raincoat", "wool hat",
                 "walking shoes"}},
    {"paper", {"brown paper", "gold paper", "striped cloth", "old newspaper", "soft tissue", "blue silk",
               "a spotted handkerchief", "a page of sheet music"}},
    {"road", {"muddy", "dusty", "long", "steep", "winding", "rocky", "narrow", "quiet", "bumpy"}},
    {"windadj", {"cold", "warm", "strong", "gentle", "sharp", "fresh", "soft", "wild"}},
    {"landmark", {"stone bridge", "wide river", "field of sunflowers", "dark wood", "frozen pond",
                  "rope bridge", "quiet village", "steep hill", "old ruin", "shallow stream"}},
    {"sawthing", {"saw a herd of goats", "passed an old windmill", "counted seven crows",
                  "picked wild berries", "heard a cuckoo", "watched the clouds", "found a smooth stone",
                  "waved to a passing cart"}},
    {"duration", {"two days", "three days", "a long week", "many hours", "half a day", "a whole morning",
                  "four days", "a long afternoon"}},
    {"placeadj", {"quiet", "busy", "bright", "windy", "noisy", "peaceful", "huge", "tiny", "beautiful",
                  "strange", "crowded", "cold", "warm"}},
    {"crowd", {"birds", "flowers", "people", "music", "boats", "stalls", "old stones", "children playing",
               "colourful tents", "lanterns", "butterflies"}},
    {"angry", {"frowned", "stamped {S.p} foot", "crossed {S.p} arms", "turned red", "sulked",
               "slammed the door", "kicked a stone", "shook {S.p} fist"}},
    {"sad", {"sad", "lonely", "sorry", "miserable", "gloomy", "upset", "foolish"}},
    {"feeling", {"tired", "hungry", "cold", "sad", "worried", "happy", "sleepy", "bored", "cross"}},
    {"age", {"five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "sixty", "eighty"}},
    {"darkcolor", {"grey", "black", "purple", "dark green", "the colour of ink", "dark"}},
    {"clearsky", {"clear", "blue", "bright", "clean and blue", "pale and calm", "full of light"}},
    {"scared", {"scared", "frightened", "lonely", "weak", "wet", "muddy"}},
    {"animalfood", {"seeds", "warm milk", "bits of bread", "fresh grass", "berries", "small fish", "oats"}},
    {"noiseact", {"scratching at the door", "knocking over pots", "rolling apples across the floor",
                  "tapping on the window", "rustling in the straw", "chewing an old boot"}},
    {"skill", {"swim", "whistle", "juggle", "play the flute", "ride a bicycle", "paint", "knit", "dance",
               "sing", "climb trees", "bake bread", "skate", "row a boat", "read music", "draw horses",
               "tie knots", "sew", "carve wood", "play chess", "fish", "play the drum", "do cartwheels"}},
    {"period", {"a month", "the summer", "the winter", "the year", "the spring", "the season"}},
    {"said", {"said", "replied", "answered", "whispered", "called", "added"}},
    {"joy", {"clapped {S.p} hands", "laughed with joy", "cried happy tears", "jumped up and down",
             "could not stop smiling", "waved both arms"}},
    {"happy", {"happy", "glad", "delighted", "pleased", "relieved", "proud", "thrilled"}},
    {"sunny", {"warm", "bright", "golden", "soft", "gentle", "pale"}},
    {"habit", {"late", "busy", "hungry", "cheerful", "kind", "clever", "careful", "forgetful"}},
    {"cakeadj", {"tall and golden", "a little burnt", "soft and sweet", "lopsided but delicious",
                 "perfect"}},
    {"cake", {"apple", "lemon", "carrot", "honey", "chocolate", "plum", "ginger", "cherry", "orange",
              "almond", "walnut", "pumpkin"}},
    {"plant", {"tomatoes", "beans", "sunflowers", "pumpkins", "carrots", "peas", "strawberries", "onions",
               "roses", "potatoes", "melons", "radishes"}},
    {"pest", {"snail", "rabbit", "goat", "crow", "caterpillar", "mole"}},
    {"bird", {"robin", "blackbird", "thrush", "lark", "wren", "sparrow", "owl", "cuckoo"}},
    {"smell", {"rain", "bread", "pine", "salt", "smoke", "roses", "hay", "apples", "wet grass"}},
    {"saying", {"A kind word costs nothing.", "Small steps still move you forward.",
                "The sun always comes back.", "Share what you have, and you will never be poor.",
                "Patience is a quiet kind of courage.", "A tired heart needs a warm supper."}},
    {"lesson", {"friends are worth more than gold", "patience pays off", "sharing makes everyone richer",
                "a little help goes a long way", "honesty is always best", "brave hearts can be small"}},
};
// Lists whose entries are things: a pronoun "it" written after one of them could be misread, so the writer
// treats them like another "it" candidate and falls back to the noun.
const std::set<std::string> kThingLists = {"container", "hiding", "food", "clothes", "paper", "landmark",
                                            "sawthing", "animalfood", "bird", "pest"};

// ---------------------------------------------------------------------------------------------- sentences
using Beat = Words;              // alternative templates; "" means "skip this beat"
using Arc = std::vector<Beat>;

const Words kOpenings = {
    "Once upon a time, {A.n} lived {@near} {P}.",
    "Once upon a time, there was {a@trait} {@job} named {A.n}.",
    "{A.n} was {a@trait} {@job} who lived {@near} {P}.",
    "One {@dayadj} morning, {A.n} woke up early.",
    "Long ago, in a village {@near} {P}, there lived {a@trait} {@job} called {A.n}.",
    "{A.n} had always lived {@near} {P}.",
    "There was once {a@trait} {@job} called {A.n}."};
const Words kMeetings = {
    "{A} had a friend named {B.n}.",
    "{B.n} was {A.p} {@relation}.",
    "{A.p} {@relation}, {B.n}, lived just down the road.",
    "One day, {A} met {B.n} {@near} {P}.",
    "{A.n} often played with {B.n}, who lived {@near} {P}.",
    "Every {@weekday}, {A} visited {A.p} {@relation}, {B.n}."};
const Words kFillers = {
    "The sun was {@sunny} over {P}.",
    "\"Are you {@feeling}?\" {B} asked {A.o}.",
    "{A} {A:was/were} {@feeling}, but {A} kept going.",
    "{a@bird} sang somewhere {@near} {P}.",
    "{A} thought of an old saying: \"{@saying}\"",
    "\"{B} {B:is/are} always so {@habit},\" thought {A.n}.",
    "The air smelled of {@smell}."};
const Words kClosings = {
    "From that day on, {A.n} and {B.n} were the best of friends.",
    "{A} never forgot that {@time}.",
    "And that is how {A.n} learned that {@lesson}.",
    "That night, {A} fell asleep with a smile.",
    ""};
const Words kConnectives = {"Then", "Later", "Soon", "After a while", "Before long", "A little later"};

const std::vector<Arc> kArcs = {
    {   // a treasured thing goes missing
        {"{A} had {O} that {A} loved more than anything.", "{A.p} favourite thing in the world was {O}.",
         "{A} owned {O}, and {A} took {O.o} everywhere."},
        {"One {@time}, {O.n} was gone.", "One {@time}, {A} could not find {O}.",
         "But one {@time}, {A} lost {O} somewhere {@near} {P}."},
        {"{A} looked under the bed, behind the door and inside every {@container}.",
         "{A} {@searched} all over {P}, but {O} was nowhere to be seen.",
         "{A} searched until {A.p} knees were muddy."},
        {"\"Have you seen my {O.b}?\" {A} asked {B.n}.", "{A} ran to {B.n} and asked for help.",
         "\"I have lost my {O.b},\" {A} told {B.o}."},
        {"\"Do not worry,\" {@said} {B.n}. \"We will find {O.o} together.\"",
         "{B} {B:was/were} sure that {O} could not be far away.", ""},
        {"{B} checked {R}, and {A} checked {P} again.", "The two friends searched until the sun went low.", ""},
        {"At last, {B} spotted {O} {@hidden} {a@hiding}.", "Finally, {A} found {O} {@hidden} {a@hiding}.",
         "Just then, {X} trotted up, and in {X.p} mouth was {O}."},
        {"{A} hugged {O.o} and laughed.", "{A} {A:was/were} so {@happy} that {A} danced around {P}.",
         "\"Thank you, {B.n}!\" said {A.n}."}},
    {   // a journey to a far place
        {"{A} had always wanted to see {R}.", "{A} dreamed of visiting {R}, far beyond {P}."},
        {"One {@time}, {A} packed {O} and {a@food} into {A.p} bag.",
         "{A} put on {A.p} {@clothes} and took {O} along."},
        {"\"Where are you going?\" asked {B.n}.", "At the gate, {A} met {B.n}."},
        {"\"I am going to {R.n},\" said {A.n}. \"Will you come with me?\"",
         "{A} told {B.o} about the trip to {R}."},
        {"{B} {B:was/were} {@happy} to come along.", "{B} thought for a moment and then fetched {B.p} {@clothes}."},
        {"The road was {@road}, and the wind was {@windadj}.",
         "The two travellers crossed {a@landmark} and followed a narrow path.", "On the way, {A} {@sawthing}."},
        {"When {B} grew tired, {A} shared {a@food} with {B.o}.", "{A} carried {O} carefully the whole way.", ""},
        {"After {@duration}, {A.n} and {B.n} reached {R}.", "Late one evening, the travellers arrived at {R}."},
        {"{R} was {@placeadj} and full of {@crowd}.", "{R} looked even better than {A} had imagined."},
        {"{A} sat down, took {O} out and smiled.", "\"We are here at last!\" cried {A.n}."}},
    {   // a trade
        {"{A} had {O}, but what {A} really wanted was {Q}.", "{A} owned {O}, yet {A} dreamed of having {Q}."},
        {"{B.n} had {Q}, and {B} had always admired {O}.", "{B.n}, who lived {@near} {P}, owned {Q}."},
        {"\"Will you trade {Q.o} for my {O.b}?\" asked {A.n}.",
         "{A} went to see {B.o} and offered {O} in exchange for {Q}."},
        {"{B} turned {O} over in {B.p} hands.", "{B} looked at {O} for a long time."},
        {"\"Only if you add {a@food},\" said {B.n}.",
         "\"{O} {O:is/are} nice,\" said {B.n}. \"But {Q} {Q:is/are} worth more.\""},
        {"{A} laughed and agreed.", "{A} thought for a moment and then nodded.",
         "{A} agreed, and the two shook hands."},
        {"Now {A} had {Q}, and {B} had {O}.", "{A} went home with {Q}, and {B} kept {O}."},
        {"Everyone was {@happy} about the trade.", "{A} used {Q} every day after that.", ""}},
    {   // an argument and a reconciliation
        {"{A.n} and {B.n} both wanted {O}.", "{A.n} and {B.n} found {O} {@near} {P} at the same moment."},
        {"\"{O} {O:is/are} mine!\" shouted {A.n}.", "\"I saw {O.o} first!\" cried {A.n}."},
        {"\"No, {O} {O:is/are} mine!\" shouted {B.n}.", "\"That is not fair!\" said {B.n}."},
        {"{A} {@angry} and went home.", "{B} {@angry} and ran off."},
        {"For the rest of the day, neither {A.n} nor {B.n} said a word.", "That night, {A} could not sleep.",
         "{A} sat alone {@near} {P} and felt {@sad}."},
        {"The next morning, {A} knocked on {B.p} door.", "In the morning, {B} came to see {A.o}."},
        {"\"I am sorry,\" said {A.n}. \"Let us share {O.o}.\"",
         "\"I was wrong,\" {B} said. \"You can keep {O.o} on weekdays.\""},
        {"{B} smiled, and the two friends shared {O} from then on.",
         "After that, {A.n} and {B.n} took turns with {O}."}},
    {   // a birthday present
        {"{A.p} birthday was coming soon.", "{A.n} was turning {@age} the next day."},
        {"{B} wanted to give {A.o} something special.", "{B} did not know what to give {A.o}."},
        {"{B} went to {P} and looked at every stall.", "{B} walked all the way to {P} with {B.p} savings."},
        {"There, {B} found {O}.", "At last, {B} chose {O}."},
        {"{B} wrapped {O} in {@paper} and tied a bow on top.", "{B} hid {O} under {B.p} coat and hurried home."},
        {"When {A} opened the present, {A} gasped.", "{A} tore open the paper and found {O}."},
        {"\"Do you like {O.o}?\" asked {B.n}.", "\"Is {O} really for me?\" asked {A.n}."},
        {"\"I love {O.o}!\" said {A.n}.", "{A} hugged {B.o} and said, \"{O} {O:is/are} the best present ever.\""}},
    {   // a storm and a frightened pet
        {"{A} had {X}, and {X} was afraid of thunder.", "{A} lived {@near} {P} with {A.p} {X.b}."},
        {"One {@dayadj} afternoon, dark clouds gathered over {P}.", "The sky over {P} turned {@darkcolor}."},
        {"Thunder rumbled, and {X.n} hid under the table.", "The wind howled, and {X} began to shake."},
        {"{A} wrapped {X.o} in a warm blanket.", "{A} sat beside {X.o} and sang softly."},
        {"\"Do not be afraid,\" {A} whispered. \"The storm will pass soon.\"", ""},
        {"Rain drummed on the roof all night.", "The storm went on for hours.", ""},
        {"{B.n} knocked on the door to check that everyone was safe.", ""},
        {"By morning, the sky was {@clearsky}, and {X} ran outside to play.",
         "In the morning, {A} opened the door, and {X} ran out into the sun."}},
    {   // a hurt animal
        {"One {@time}, {A} found {X} {@near} {P}.",
         "While walking {@near} {P}, {A} heard a soft cry and found {X}."},
        {"{X} had a hurt leg and could not walk.", "{X} was cold, hungry and {@scared}."},
        {"{A} carried {X.o} home in {A.p} arms.", "{A} lifted {X.o} gently and took {X.o} home."},
        {"{B.n} helped {A.o} make a little bed for {X.o}.", "\"What will you feed {X.o}?\" asked {B.n}."},
        {"Every day, {A} gave {X.o} {@animalfood} and fresh water.", ""},
        {"After {@duration}, {X} was strong again.", "Slowly, {X} grew stronger."},
        {"{A} took {X.o} back to {P} and let {X.o} go.",
         "{X} decided to stay with {A.o}, and {A} {A:was/were} glad."}},
    {   // a noise in the night
        {"Every night, {A} heard a strange noise coming from {P}.",
         "For a week, something had been making noises in {P} at night."},
        {"\"What could that sound be?\" {A} asked {B.n}.", "{A} told {B.n} about the noise."},
        {"{B} {B:was/were} too scared to go and look.", "{B} said that the noise was only the wind."},
        {"So {A} took {O} and went into {P} alone.", "One night, {A} took {O} and crept into {P}."},
        {"There, behind {a@hiding}, sat {X}.", "In a dark corner, {A} found {X}."},
        {"{X} had been {@noiseact} all along.", "{X} blinked up at {A.o}."},
        {"\"The noise was only {X.n}!\" {A} told {B.n} the next day.",
         "{A} laughed, and from then on {A} left {a@food} out for {X.o}."}},
    {   // baking for a friend
        {"{A.n} and {B.n} decided to bake {a$cake} cake for {C.n}.",
         "{C.n} had been {@sad} all week, so {A.n} and {B.n} decided to bake {C.o} {a$cake} cake."},
        {"{A} brought flour and eggs, and {B} brought a big bowl.", "{B} found an old recipe in a drawer."},
        {"{B} stirred the batter while {A} watched the oven.",
         "{A} cracked the eggs, and {B} mixed everything together."},
        {"The cake came out {@cakeadj}.", "Soon the whole house smelled of {$cake}."},
        {"{A.n} and {B.n} carried the cake to {C.p} house.",
         "{A} carried the cake all the way to {P}, where {C} {C:was/were} waiting."},
        {"When {C} saw the cake, {C} {@joy}.", "{C} could not believe {C.p} eyes."},
        {"\"You are the best friends anyone could have,\" said {C.n}.", "\"Thank you both,\" {C} said."}},
    {   // learning a skill
        {"{A} wanted to learn to {$skill}.", "More than anything, {A} wished {A} could {$skill}."},
        {"{A} asked {C.n}, who knew how to {$skill}, for help.", "{C.n} offered to teach {A.o}."},
        {"\"Practise every day,\" said {C.n}. \"Never give up.\"", "\"Watch me first,\" {C} said."},
        {"At first, {A} kept making mistakes.", "{A} tried again and again, but nothing went right."},
        {"{B} laughed at {A.o}, and {A} felt {@sad}.", "{A} almost gave up.", ""},
        {"But {A} did not stop trying.", "{C} told {A.o} to be patient."},
        {"By the end of {@period}, {A} could {$skill} better than anyone {@near} {P}.",
         "One day, {A} could finally {$skill}."},
        {"{B} cheered, and {C} {@joy}.", "\"I knew you would learn,\" said {C.n}."}},
    {   // a garden nobody believed in
        {"In the spring, {A} planted {$plant} in a corner of {P}.", "{A} decided to grow {$plant} behind {P}."},
        {"Every morning, {A} watered the ground and pulled out the weeds.",
         "{A} watered the little plants every day, even when {A} {A:was/were} tired."},
        {"{B.n} laughed. \"Nothing will grow there,\" {B} said.", "\"Why do you work so hard?\" asked {B.n}."},
        {"For weeks, nothing happened.", "Then {a@pest} came and ate some of the leaves."},
        {"{A} did not give up.", "{A} built a little fence and kept working."},
        {"By the end of the summer, {A} had more {$plant} than {A} could count.",
         "At last, the {$plant} were ready."},
        {"{A} gave a basket of {$plant} to {B.n}.", "{A} shared {A.p} {$plant} with everyone {@near} {P}."},
        {"\"I was wrong,\" {B} said.", "{B} said sorry and asked to help next year."}},
    {   // a borrowed thing breaks
        {"{A} lent {O} to {B.n} for the day.", "{B.n} borrowed {O} from {A.n}."},
        {"{B} promised to be careful with {O.o}.", "\"Please look after {O.o},\" said {A.n}."},
        {"But while {B} {B:was/were} playing {@near} {P}, {O} fell and broke."},
        {"{B} {B:was/were} afraid to tell {A.o}.", "{B} thought about hiding {O}."},
        {"{C.n} saw how worried {B} looked."},
        {"\"Just tell the truth,\" said {C.n}.", ""},
        {"So {B} went to {A.o} and said, \"I am sorry. I broke your {O.b}.\""},
        {"{A} {A:was/were} quiet for a moment.", "{A} sighed."},
        {"\"Thank you for telling me,\" said {A.n}. \"We can fix {O.o} together.\""},
        {"That evening, {A.n} and {B.n} glued {O} back together.", "With a little glue, {O} was as good as new."}},
};

// ---------------------------------------------------------------------------------------------- entities
enum class Kind { Person, Group, Place, Thing, Animal };
enum class Pron { He, She, They, It };
enum class Form { Subject, Object, Possessive, Name, Bare };

struct Entity {
    Kind kind;
    Pron pron;
    std::string noun;          // "Mira", "twins", "old mill", "music box": what an antecedent points at
    std::string adjective;     // said once, on first mention ("a red kite", then "the kite")
    bool introduced = false;
    int named_in = -100;       // sentence of the last name/noun mention
    int mentioned_in = -100;   // sentence of the last mention of any kind
    size_t name_offset = 0;    // where that last name/noun mention starts in the story text
    bool plural_now = false;   // was the last mention plural ("they", "the twins")?
};

Entity make_entity(Kind kind, Pron pron, const std::string& noun, const std::string& adjective = "") {
    Entity e;
    e.kind = kind;
    e.pron = pron;
    e.noun = noun;
    e.adjective = adjective;
    return e;
}

// Pronoun forms indexed by Pron then Form (subject, object, possessive).
std::string pronoun_word(Pron pron, Form form) {
    static const char* const table[4][3] = {
        {"he", "him", "his"}, {"she", "her", "her"}, {"they", "them", "their"}, {"it", "it", "its"}};
    return table[static_cast<int>(pron)][static_cast<int>(form)];
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// "a" or "an" by sound; spelling gives the sound except for a few word starts.
std::string article_for(const std::string& phrase) {
    for (const char* sounds_like_vowel : {"hour", "honest", "heir"})
        if (starts_with(phrase, sounds_like_vowel)) return "an";
    for (const char* sounds_like_consonant : {"uni", "use", "usu", "eu", "one"})
        if (starts_with(phrase, sounds_like_consonant)) return "a";
    const char c = phrase.empty() ? 'x' : phrase[0];
    return (c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u') ? "an" : "a";
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
char to_upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

// ---------------------------------------------------------------------------------------------- one story
struct Annotation {
    size_t pronoun_offset;
    size_t pronoun_length;
    size_t antecedent_offset;
    std::string antecedent;
};

// Every time a person or a group is written by name: the candidates a pronoun could point at.
struct Mention {
    size_t offset;
    std::string name;  // "Mira", or "twins" for "the twins"
    Pron pron;
};

// Renders templates into one story's text, deciding name-or-pronoun for every mention.
class StoryWriter {
public:
    StoryWriter(Rng& rng, std::map<char, Entity> cast) : rng_(rng), cast_(std::move(cast)) {}

    // Writes the next sentence; `connective` ("Then") is put in front. An empty template writes nothing.
    void sentence(const std::string& tmpl, const std::string& connective = "") {
        if (tmpl.empty()) return;
        ++sentence_;
        last_subject_ = 0;
        if (!text_.empty()) put(' ');
        capitalize_next_ = true;
        if (!connective.empty()) emit(connective + ", ");
        expand(tmpl);
    }
    const std::string& text() const { return text_; }
    const std::vector<Annotation>& annotations() const { return notes_; }
    const std::vector<Mention>& mentions() const { return mentions_; }

private:
    void expand(const std::string& tmpl) {
        for (size_t i = 0; i < tmpl.size(); ++i) {
            if (tmpl[i] != '{') { put(tmpl[i]); continue; }
            const size_t close = tmpl.find('}', i);
            if (close == std::string::npos) throw std::runtime_error("unclosed slot in: " + tmpl);
            fill_slot(tmpl.substr(i + 1, close - i - 1));
            i = close;
        }
    }

    void fill_slot(const std::string& slot) {
        if (slot.empty()) throw std::runtime_error("empty slot {}");
        const bool article = slot.size() > 1 && slot[0] == 'a';
        const std::string rest = article ? slot.substr(1) : slot;
        if (rest[0] == '@' || rest[0] == '$') return write_word(rest.substr(1), article, rest[0] == '$');

        const char role = slot[0] == 'S' ? last_subject_ : slot[0];
        if (!cast_.count(role)) throw std::runtime_error("unknown role in slot {" + slot + "}");
        if (slot.size() > 2 && slot[1] == ':') {  // {A:was/were}
            const std::string forms = slot.substr(2);
            const size_t slash = forms.find('/');
            return emit(cast_.at(role).plural_now ? forms.substr(slash + 1) : forms.substr(0, slash));
        }
        Form form = Form::Subject;
        if (slot.size() == 3 && slot[1] == '.') {
            const std::string forms = "opnb";
            const Form by_letter[] = {Form::Object, Form::Possessive, Form::Name, Form::Bare};
            const size_t which = forms.find(slot[2]);
            if (which == std::string::npos) throw std::runtime_error("unknown form in slot {" + slot + "}");
            form = by_letter[which];
        } else if (slot.size() != 1) {
            throw std::runtime_error("malformed slot {" + slot + "}");
        }
        mention(role, form);
    }

    void write_word(const std::string& list, bool with_article, bool once_per_story) {
        const auto found = kWordLists.find(list);
        if (found == kWordLists.end()) throw std::runtime_error("unknown word list @" + list);
        std::string word;
        if (!once_per_story) word = rng_.pick(found->second);
        else if (story_words_.count(list)) word = story_words_[list];
        else word = story_words_[list] = rng_.pick(found->second);
        if (with_article) emit(article_for(word) + " ");
        expand(word);  // a few entries have slots of their own, e.g. "crossed {S.p} arms"
        if (kThingLists.count(list)) thing_distractor_in_ = sentence_;
    }

    // A pronoun is clear when its referent was named recently (people: in the last two sentences; things
    // and places: in this one or the last) and no other entity that takes the same pronoun (nor an unnamed
    // thing, for "it") has been mentioned since the sentence where it was named began.
    bool pronoun_is_clear(const Entity& e) const {
        const int window = e.pron == Pron::It ? 1 : 2;
        if (!e.introduced || sentence_ - e.named_in > window) return false;
        for (const auto& entry : cast_) {
            const Entity& other = entry.second;
            if (&other != &e && other.pron == e.pron && other.mentioned_in >= e.named_in) return false;
        }
        return e.pron != Pron::It || thing_distractor_in_ < e.named_in;
    }

    bool wants_pronoun(const Entity& e) {
        if (!pronoun_is_clear(e)) return false;
        if (e.mentioned_in == sentence_) return true;  // "Mira said Mira was tired" is not English
        return rng_.percent(e.mentioned_in == sentence_ - 1 ? 75 : 50);
    }

    void mention(char role, Form form) {
        Entity& e = cast_.at(role);
        const bool may_be_pronoun = form == Form::Subject || form == Form::Object || form == Form::Possessive;
        if (may_be_pronoun && wants_pronoun(e)) {
            const size_t at = text_.size();
            emit(pronoun_word(e.pron, form));
            notes_.push_back({at, text_.size() - at, e.name_offset, e.noun});
            e.plural_now = e.pron == Pron::They;
        } else {
            write_noun_phrase(e, form);
            e.plural_now = e.kind == Kind::Group;
        }
        e.mentioned_in = sentence_;
        if (form == Form::Subject) last_subject_ = role;
    }

    // "Mira", "the twins", "the old mill", "a red kite" (first time), "the kite" (after), plus "'s".
    void write_noun_phrase(Entity& e, Form form) {
        const bool countable = e.kind == Kind::Thing || e.kind == Kind::Animal;
        const std::string described = (countable && !e.introduced && !e.adjective.empty()) ? e.adjective + " " : "";
        if (form != Form::Bare) {
            if (e.kind == Kind::Group || e.kind == Kind::Place) emit("the ");
            if (countable) emit(e.introduced ? "the " : article_for(described + e.noun) + " ");
        }
        emit(described);
        e.name_offset = text_.size();
        if (e.kind == Kind::Person || e.kind == Kind::Group) mentions_.push_back({text_.size(), e.noun, e.pron});
        emit(e.noun);
        if (form == Form::Possessive) emit(e.kind == Kind::Group && e.noun.back() == 's' ? "'" : "'s");
        e.introduced = true;
        e.named_in = sentence_;
    }

    void emit(const std::string& s) { for (char c : s) put(c); }

    // Appends one character, capitalising the first letter of a sentence or of a quotation.
    // Capitalising never changes lengths, so recorded offsets stay valid.
    void put(char c) {
        const char before = text_.empty() ? ' ' : text_.back();
        if (capitalize_next_ && is_letter(c)) { c = to_upper(c); capitalize_next_ = false; }
        text_ += c;
        if (c == '"' && before == ' ') capitalize_next_ = true;  // an opening quote starts a sentence
        if (c == ' ' && (before == '.' || before == '?' || before == '!')) capitalize_next_ = true;
    }

    Rng& rng_;
    std::map<char, Entity> cast_;
    std::string text_;
    std::vector<Annotation> notes_;
    std::vector<Mention> mentions_;
    std::map<std::string, std::string> story_words_;
    int sentence_ = 0;
    int thing_distractor_in_ = -100;
    char last_subject_ = 0;
    bool capitalize_next_ = true;
};

// ---------------------------------------------------------------------------------------------- casting
Entity choose_person(Rng& rng, std::set<std::string>& used) {
    for (;;) {
        const size_t roll = rng.below(100);
        const Pron pron = roll < 45 ? Pron::She : roll < 90 ? Pron::He : Pron::They;
        const Words& names = pron == Pron::She ? kSheNames : pron == Pron::He ? kHeNames : kTheyNames;
        const std::string& name = rng.pick(names);
        if (used.insert(name).second) return make_entity(Kind::Person, pron, name);
    }
}

Entity choose_described(Rng& rng, Kind kind, const Words& nouns, const Words& adjectives, unsigned adjective_percent,
                       std::set<std::string>& used) {
    std::string noun;
    do noun = rng.pick(nouns);
    while (!used.insert(noun).second);
    std::string adjective;
    if (rng.percent(adjective_percent)) adjective = rng.pick(adjectives);
    return make_entity(kind, Pron::It, noun, adjective);
}

// Each rng call is its own statement: argument evaluation order is unspecified in C++, and the output
// must not depend on the compiler.
std::map<char, Entity> choose_cast(Rng& rng) {
    std::set<std::string> used;
    std::map<char, Entity> cast;
    cast.emplace('A', choose_person(rng, used));
    cast.emplace('B', choose_person(rng, used));
    if (rng.percent(25)) cast.emplace('C', make_entity(Kind::Group, Pron::They, rng.pick(kGroups)));
    else cast.emplace('C', choose_person(rng, used));
    cast.emplace('O', choose_described(rng, Kind::Thing, kThings, kThingAdjectives, 50, used));
    cast.emplace('Q', choose_described(rng, Kind::Thing, kThings, kThingAdjectives, 50, used));
    cast.emplace('P', choose_described(rng, Kind::Place, kPlaces, {}, 0, used));
    cast.emplace('R', choose_described(rng, Kind::Place, kPlaces, {}, 0, used));
    cast.emplace('X', choose_described(rng, Kind::Animal, kAnimals, kAnimalAdjectives, 60, used));
    return cast;
}

// ---------------------------------------------------------------------------------------------- the corpus
struct Story {
    std::string text;
    std::vector<Annotation> notes;
    std::vector<Mention> mentions;
};

bool starts_with_person(const std::string& tmpl) {  // "{A} ..." can take "Then, " in front
    return tmpl.size() > 3 && tmpl[0] == '{' && tmpl[1] >= 'A' && tmpl[1] <= 'C' && tmpl[2] == '}';
}

// Opening, meeting, one arc (with an occasional aside between beats), closing: about 7 to 14 sentences.
Story write_story(Rng& rng) {
    StoryWriter writer(rng, choose_cast(rng));
    writer.sentence(rng.pick(kOpenings));
    writer.sentence(rng.pick(kMeetings));
    const Arc& arc = rng.pick(kArcs);
    int asides = 0;
    for (size_t beat = 0; beat < arc.size(); ++beat) {
        const std::string& tmpl = rng.pick(arc[beat]);
        const bool linked = beat >= 2 && starts_with_person(tmpl) && rng.percent(15);
        writer.sentence(tmpl, linked ? rng.pick(kConnectives) : "");
        if (beat >= 1 && beat + 1 < arc.size() && asides < 2 && rng.percent(10)) {
            writer.sentence(rng.pick(kFillers));
            ++asides;
        }
    }
    writer.sentence(rng.pick(kClosings));
    return {writer.text(), writer.annotations(), writer.mentions()};
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ULL;
    return h;
}

struct Corpus {
    std::string text;
    std::vector<Annotation> notes;
    std::vector<Mention> mentions;
    size_t stories = 0;
};

// Stories one after another, separated by a blank line, until the text reaches target_bytes.
Corpus write_corpus(uint64_t target_bytes, uint64_t seed) {
    Rng rng(seed);
    Corpus corpus;
    std::set<uint64_t> seen;  // no story twice: a repeat would leak from the training split into validation
    while (corpus.text.size() < target_bytes) {
        const Story story = write_story(rng);
        if (!seen.insert(fnv1a(story.text)).second) continue;
        if (!corpus.text.empty()) corpus.text += '\n';
        const size_t base = corpus.text.size();
        for (Annotation note : story.notes) {
            note.pronoun_offset += base;
            note.antecedent_offset += base;
            corpus.notes.push_back(note);
        }
        for (Mention m : story.mentions) {
            m.offset += base;
            corpus.mentions.push_back(m);
        }
        corpus.text += story.text + '\n';
        ++corpus.stories;
    }
    return corpus;
}

// ---------------------------------------------------------------------------------------------- the probe set
// An evaluation set for pronoun resolution, not training text (--probes N). In the stories a pronoun's antecedent
// is usually also the nearest name, so "look at the last name" and "resolve the pronoun" cannot be told apart
// there. Each probe names a woman and a man, in either order, in one sentence, then a pronoun that refers to one
// of them: "Maya gave Omar the cup. She smiled." Half the probes point at the first name, where the nearest name
// is wrong by construction and only the pronoun's gender picks the antecedent; half at the second, as a control.
const Words kProbeSetups = {
    "One day, {A} met {B} near the {P}.", "{A} gave {B} the {O}.", "{A} waved at {B}.",
    "{A} had a friend named {B}.",        "{A} ran to {B} and asked for help.",
    "{A} told {B} about the {O}.",        "After a while, {A} found {B} near the {P}.",
    "{A} lent the {O} to {B}."};
const Words kProbeEndings = {"{X} smiled.", "{X} laughed.", "{X} was happy.", "{X} went home.", "Then {x} waved.",
                             "{X} sat down."};

Story write_probe(Rng& rng) {
    const bool she_first = rng.percent(50);
    const std::string& she = rng.pick(kSheNames);
    const std::string& he = rng.pick(kHeNames);
    const std::string first = she_first ? she : he, second = she_first ? he : she;
    const bool refers_to_first = rng.percent(50);
    const bool pronoun_is_she = refers_to_first == she_first;
    const std::string& setup = rng.pick(kProbeSetups);
    const std::string& ending = rng.pick(kProbeEndings);
    const std::string& place = rng.pick(kPlaces);
    const std::string& thing = rng.pick(kThings);
    Story story;
    size_t first_at = 0, second_at = 0;
    auto expand = [&](const std::string& tmpl) {
        for (size_t i = 0; i < tmpl.size(); ++i) {
            if (tmpl[i] != '{') { story.text += tmpl[i]; continue; }
            const char slot = tmpl[i + 1];
            i += 2;
            const size_t at = story.text.size();
            if (slot == 'A') story.text += first, first_at = at;
            if (slot == 'B') story.text += second, second_at = at;
            if (slot == 'A' || slot == 'B')
                story.mentions.push_back({at, slot == 'A' ? first : second,
                                          (slot == 'A') == she_first ? Pron::She : Pron::He});
            if (slot == 'P') story.text += place;
            if (slot == 'O') story.text += thing;
            if (slot == 'X' || slot == 'x') {
                std::string word = pronoun_is_she ? "she" : "he";
                if (slot == 'X') word[0] = to_upper(word[0]);
                story.text += word;
                story.notes.push_back({at, word.size(), refers_to_first ? first_at : second_at,
                                       refers_to_first ? first : second});
            }
        }
    };
    expand(setup);
    story.text += ' ';
    expand(ending);
    return story;
}

// n probes, one per "story", separated by blank lines like the corpus.
Corpus write_probes(uint64_t n, uint64_t seed) {
    Rng rng(seed);
    Corpus corpus;
    std::set<uint64_t> seen;
    while (corpus.stories < n) {
        const Story story = write_probe(rng);
        if (!seen.insert(fnv1a(story.text)).second) continue;
        if (!corpus.text.empty()) corpus.text += '\n';
        const size_t base = corpus.text.size();
        for (Annotation note : story.notes) {
            note.pronoun_offset += base, note.antecedent_offset += base;
            corpus.notes.push_back(note);
        }
        for (Mention m : story.mentions) m.offset += base, corpus.mentions.push_back(m);
        corpus.text += story.text + '\n';
        ++corpus.stories;
    }
    return corpus;
}

// ---------------------------------------------------------------------------------------------- checking
bool is_third_person_pronoun(std::string word) {
    for (char& c : word) c = to_lower(c);
    static const std::set<std::string> pronouns = {"he", "him", "his", "she", "her", "hers", "they",
                                                   "them", "their", "theirs", "it", "its"};
    return pronouns.count(word) > 0;
}

bool is_whole_word(const std::string& text, size_t offset, size_t length) {
    const bool starts = offset == 0 || !is_letter(text[offset - 1]);
    const bool ends = offset + length >= text.size() || !is_letter(text[offset + length]);
    return starts && ends;
}

// Returns "" if every annotation matches the text and every he/she/they/it-family word is annotated;
// otherwise a description of the first problem.
std::string verify(const Corpus& corpus) {
    const std::string& text = corpus.text;
    std::set<size_t> annotated;
    for (const Annotation& a : corpus.notes) {
        const std::string where = " (pronoun at offset " + std::to_string(a.pronoun_offset) + ")";
        if (a.pronoun_offset + a.pronoun_length > text.size()) return "pronoun past the end" + where;
        const std::string word = text.substr(a.pronoun_offset, a.pronoun_length);
        if (!is_third_person_pronoun(word) || !is_whole_word(text, a.pronoun_offset, a.pronoun_length))
            return "'" + word + "' is not a whole pronoun" + where;
        if (text.compare(a.antecedent_offset, a.antecedent.size(), a.antecedent) != 0 ||
            !is_whole_word(text, a.antecedent_offset, a.antecedent.size()))
            return "antecedent '" + a.antecedent + "' not found at its offset" + where;
        if (a.antecedent_offset + a.antecedent.size() > a.pronoun_offset) return "antecedent after pronoun" + where;
        annotated.insert(a.pronoun_offset);
    }
    for (const Mention& m : corpus.mentions)
        if (text.compare(m.offset, m.name.size(), m.name) != 0 || !is_whole_word(text, m.offset, m.name.size()))
            return "mention '" + m.name + "' not found at offset " + std::to_string(m.offset);
    for (size_t i = 0; i < text.size();) {
        if (static_cast<unsigned char>(text[i]) > 126) return "non-ASCII byte at offset " + std::to_string(i);
        if (!is_letter(text[i])) { ++i; continue; }
        size_t end = i;
        while (end < text.size() && is_letter(text[end])) ++end;
        if (is_third_person_pronoun(text.substr(i, end - i)) && !annotated.count(i))
            return "unannotated pronoun '" + text.substr(i, end - i) + "' at offset " + std::to_string(i);
        i = end;
    }
    return "";
}

// ---------------------------------------------------------------------------------------------- output
std::string antecedent_table(const Corpus& corpus) {
    std::string tsv = "pronoun_offset\tpronoun_length\tpronoun\tantecedent_offset\tantecedent_length\tantecedent\n";
    for (const Annotation& a : corpus.notes) {
        tsv += std::to_string(a.pronoun_offset) + '\t' + std::to_string(a.pronoun_length) + '\t' +
               corpus.text.substr(a.pronoun_offset, a.pronoun_length) + '\t' + std::to_string(a.antecedent_offset) +
               '\t' + std::to_string(a.antecedent.size()) + '\t' + a.antecedent + '\n';
    }
    return tsv;
}

std::string mention_table(const Corpus& corpus) {
    static const char* const pronouns[] = {"he", "she", "they", "it"};
    std::string tsv = "offset\tlength\tname\tpronoun\n";
    for (const Mention& m : corpus.mentions)
        tsv += std::to_string(m.offset) + '\t' + std::to_string(m.name.size()) + '\t' + m.name + '\t' +
               pronouns[static_cast<int>(m.pron)] + '\n';
    return tsv;
}

// Writes to "path.tmp" and renames it over path, so a failed run never leaves half a file behind.
bool write_file_atomically(const std::string& path, const std::string& content) {
    const std::string temp = path + ".tmp";
    {
        std::ofstream file(temp, std::ios::binary);
        file.write(content.data(), static_cast<std::streamsize>(content.size()));
        file.close();
        if (!file) { std::remove(temp.c_str()); return false; }
    }
    if (std::rename(temp.c_str(), path.c_str()) != 0) {
        std::remove(path.c_str());  // some systems refuse to rename over an existing file
        if (std::rename(temp.c_str(), path.c_str()) != 0) { std::remove(temp.c_str()); return false; }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------- flags
struct Options {
    std::string out;          // empty: stdout
    std::string antecedents;  // empty: no table
    std::string mentions;     // empty: no table
    uint64_t probes = 0;      // > 0: write that many probes instead of the corpus
    uint64_t bytes = 1000000;
    uint64_t seed = 1;
};

const char* const kUsage =
    "usage: make_stories [--out FILE] [--bytes N] [--seed S] [--antecedents FILE] [--mentions FILE] [--probes N]\n"
    "  --out FILE          write the stories to FILE (default: stdout)\n"
    "  --bytes N           stop after the story that reaches N bytes (default 1000000)\n"
    "  --seed S            random seed; the same flags always give byte-identical output (default 1)\n"
    "  --antecedents FILE  also write a TSV with every pronoun and the offset of its antecedent\n"
    "  --mentions FILE     also write a TSV with every person or group written by name (offset, name, pronoun)\n"
    "  --probes N          write N pronoun probes instead of the stories: \"Maya gave Omar the cup. She smiled.\"\n"
    "                      (an evaluation set: half the pronouns refer to the first name, not the nearest)\n";

[[noreturn]] void bad_flag(const std::string& message) {
    std::cerr << "make_stories: " << message << "\n" << kUsage;
    std::exit(2);
}

uint64_t parse_number(const std::string& flag, const std::string& value) {
    if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos)
        bad_flag(flag + " needs a whole number, got '" + value + "'");
    return std::stoull(value);
}

Options parse_options(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") { std::cout << kUsage; std::exit(0); }
        if (flag != "--out" && flag != "--bytes" && flag != "--seed" && flag != "--antecedents" &&
            flag != "--mentions" && flag != "--probes")
            bad_flag("unknown flag '" + flag + "'");
        if (i + 1 >= argc) bad_flag(flag + " needs a value");
        const std::string value = argv[++i];
        if (flag == "--out") options.out = value;
        if (flag == "--antecedents") options.antecedents = value;
        if (flag == "--bytes") options.bytes = parse_number(flag, value);
        if (flag == "--seed") options.seed = parse_number(flag, value);
        if (flag == "--mentions") options.mentions = value;
        if (flag == "--probes") options.probes = parse_number(flag, value);
    }
    if (options.bytes == 0) bad_flag("--bytes must be at least 1");
    return options;
}

}  // namespace

int main(int argc, char** argv) {
    const Options options = parse_options(argc, argv);
    Corpus corpus;
    try {
        corpus = options.probes > 0 ? write_probes(options.probes, options.seed) : write_corpus(options.bytes, options.seed);
    } catch (const std::exception& e) {
        std::cerr << "make_stories: template error: " << e.what() << "\n";
        return 1;
    }
    const std::string problem = verify(corpus);
    if (!problem.empty()) {
        std::cerr << "make_stories: annotation check failed: " << problem << "\n";
        return 1;
    }
    if (options.out.empty()) std::cout << corpus.text << std::flush;
    else if (!write_file_atomically(options.out, corpus.text)) {
        std::cerr << "make_stories: cannot write " << options.out << "\n";
        return 1;
    }
    if (!options.antecedents.empty() && !write_file_atomically(options.antecedents, antecedent_table(corpus))) {
        std::cerr << "make_stories: cannot write " << options.antecedents << "\n";
        return 1;
    }
    if (!options.mentions.empty() && !write_file_atomically(options.mentions, mention_table(corpus))) {
        std::cerr << "make_stories: cannot write " << options.mentions << "\n";
        return 1;
    }
    std::cerr << "make_stories: " << corpus.stories << (options.probes ? " probes, " : " stories, ") << corpus.text.size() << " bytes, "
              << corpus.notes.size() << " pronouns annotated and verified\n";
    return 0;
}
